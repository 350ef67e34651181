package run

// The warm runtimes between tries (rig try): a runtime a try started is
// parked rather than stopped when the try ends, keyed by everything that
// makes one start of a runtime differ from another (the build's digest, the
// model's digest, context, slots, offload, the card it is held to, the
// sandbox). The next try whose arm asks for the very same start gets it back
// at once; a change of any of those starts a new one. Stop cap, sampling and
// prompts are per request, so editing them keeps the runtime warm. A parked
// runtime not asked for within the pool's keep time is stopped.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"rig/internal/cgroup"
	"rig/runtimes"
)

// DefaultTryKeep is how long a parked runtime waits for the next try.
const DefaultTryKeep = 5 * time.Minute

// TryPool keeps the runtimes of the last tries up for a while. Safe for
// concurrent use; the zero value is not: use NewTryPool.
type TryPool struct {
	keep time.Duration
	log  *slog.Logger
	// dir holds the runtimes' own folders (socket, logs, private HOME): a
	// parked runtime outlives the try that started it, so it must not live
	// in that try's folder, which rig try prune removes.
	dir string
	n   int

	mu     sync.Mutex
	parked map[string]*pooled
	timer  *time.Timer
	closed bool
}

// pooled is one runtime started for a try, with the card reservation it
// runs in (nil without one), which lives exactly as long as it does.
type pooled struct {
	runtimes.Runtime
	key    string
	dir    string // its own folder, removed when it stops
	res    *cgroup.Reservation
	pool   *TryPool
	idleAt time.Time
	// Reused is true when a try got it parked from an earlier one.
	reused bool
}

// NewTryPool is a pool whose runtimes live under dir and wait keep for the
// next try once parked (DefaultTryKeep when keep is 0; a negative keep parks
// nothing: every try starts afresh).
func NewTryPool(dir string, keep time.Duration, log *slog.Logger) *TryPool {
	if keep == 0 {
		keep = DefaultTryKeep
	}
	if log == nil {
		log = slog.Default()
	}
	return &TryPool{keep: keep, log: log, dir: dir, parked: map[string]*pooled{}}
}

// Keep is how long a parked runtime waits for the next try.
func (p *TryPool) Keep() time.Duration { return p.keep }

// poolKey is every input of one runtime start that the runtime holds for
// its life. Fields a request carries (stop cap, sampling, prompt) are not
// in it, and neither is the folder, which the pool picks.
func poolKey(b runtimes.Build, cfg runtimes.Config, reserve uint64) string {
	return fmt.Sprintf("%s|%s|%s|%s|ctx=%d|slots=%d|kv=%s|nosandbox=%v|offload=%+v|card=%d|reserve=%d",
		b.Runtime, b.BinarySHA256, cfg.ModelSHA256, cfg.ModelName, cfg.Context, cfg.Slots, cfg.KVCacheType, cfg.NoSandbox, cfg.Offload, cfg.CardBudget, reserve)
}

// start gives a runtime for cfg: a parked one with the same key, else a
// fresh one from launch, in a reservation of reserve bytes when reserve is
// not 0 (made before it starts, so its whole process tree is inside).
func (p *TryPool) start(ctx context.Context, b runtimes.Build, cfg runtimes.Config, reserve uint64,
	launch func(context.Context, runtimes.Build, runtimes.Config) (runtimes.Runtime, error)) (runtimes.Runtime, error) {
	key := poolKey(b, cfg, reserve)
	p.mu.Lock()
	if rt, ok := p.parked[key]; ok {
		delete(p.parked, key)
		p.mu.Unlock()
		if alive(rt) {
			rt.reused = true
			return rt, nil
		}
		rt.stop(ctx)
		p.mu.Lock()
	}
	p.n++
	cfg.WorkDir = filepath.Join(p.dir, fmt.Sprintf("rt-%d-%d", os.Getpid(), p.n))
	p.mu.Unlock()
	var res *cgroup.Reservation
	if reserve > 0 {
		r, err := cgroup.Reserve(ctx, reserve)
		if err != nil && !errors.Is(err, cgroup.ErrNoCgroup) {
			return nil, err
		}
		if r != nil {
			res, cfg.CgroupDir = r, r.Dir()
		} else {
			p.log.Warn("no writable memory cgroup: the simulated card is not enforced in this try")
		}
	}
	rt, err := launch(ctx, b, cfg)
	if err != nil {
		if res != nil {
			res.Close()
		}
		return nil, err
	}
	return &pooled{Runtime: rt, key: key, dir: cfg.WorkDir, res: res, pool: p}, nil
}

// alive is false once the runtime's process tree has ended.
func alive(rt *pooled) bool {
	sb := rt.Sandbox()
	if sb == nil {
		return true
	}
	select {
	case <-sb.Done():
		return false
	default:
		return true
	}
}

// Stop parks the runtime for the next try instead of stopping it; a pool
// that keeps nothing, or is closed, or a runtime that died, stops it.
func (rt *pooled) Stop(ctx context.Context) error {
	p := rt.pool
	p.mu.Lock()
	if p.closed || p.keep < 0 || !alive(rt) {
		p.mu.Unlock()
		return rt.stop(ctx)
	}
	if old, ok := p.parked[rt.key]; ok && old != rt {
		// Two runtimes of one key (a try that ran one arm twice over):
		// one is enough to keep warm.
		defer old.stop(ctx)
	}
	rt.idleAt = time.Now()
	p.parked[rt.key] = rt
	p.armLocked()
	p.mu.Unlock()
	return nil
}

// stop really stops the runtime and removes its reservation.
func (rt *pooled) stop(ctx context.Context) error {
	err := rt.Runtime.Stop(ctx)
	if rt.res != nil {
		if cerr := rt.res.Close(); cerr != nil {
			rt.pool.log.Error("removing a try's card reservation", "cgroup", rt.res.Dir(), "err", cerr)
		}
		rt.res = nil
	}
	os.RemoveAll(rt.dir) // its socket and log: nothing outlives the runtime
	return err
}

// armLocked makes sure the reaper runs when the oldest parked runtime's
// keep ends.
func (p *TryPool) armLocked() {
	if p.timer != nil {
		return
	}
	p.timer = time.AfterFunc(p.keep, p.reap)
}

// reap stops every runtime parked for longer than the keep time and arms
// itself again for the rest.
func (p *TryPool) reap() {
	p.mu.Lock()
	p.timer = nil
	var old []*pooled
	next := time.Duration(-1)
	for k, rt := range p.parked {
		idle := time.Since(rt.idleAt)
		if idle >= p.keep {
			old = append(old, rt)
			delete(p.parked, k)
		} else if left := p.keep - idle; next < 0 || left < next {
			next = left
		}
	}
	if next >= 0 && !p.closed {
		p.timer = time.AfterFunc(next, p.reap)
	}
	p.mu.Unlock()
	for _, rt := range old {
		p.log.Info("stopping a try's idle runtime", "runtime", rt.Name(), "pid", runtimePID(rt))
		rt.stop(context.Background())
	}
}

// Parked is how many runtimes wait for the next try.
func (p *TryPool) Parked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked)
}

// Drain stops every parked runtime now and keeps the pool open: a counted
// run is about to start and must have the card (and the host's memory) to
// itself.
func (p *TryPool) Drain(ctx context.Context) {
	p.mu.Lock()
	all := p.parked
	p.parked = map[string]*pooled{}
	p.mu.Unlock()
	for _, rt := range all {
		rt.stop(ctx)
	}
}

// Close stops every parked runtime; runtimes in use are stopped when their
// try ends.
func (p *TryPool) Close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	all := p.parked
	p.parked = map[string]*pooled{}
	p.mu.Unlock()
	for _, rt := range all {
		rt.stop(ctx)
	}
}

// runtimePID is the runtime's own process id, 0 when not known.
func runtimePID(rt runtimes.Runtime) int {
	if sb := rt.Sandbox(); sb != nil {
		return sb.RuntimePID
	}
	return 0
}
