package governor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrHeld is matched by a HeldError.
var ErrHeld = errors.New("governor holds the queue")

// HeldError says why no trial may start now.
type HeldError struct{ Reason string }

func (e *HeldError) Error() string        { return "governor holds the queue: " + e.Reason }
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Gate is what the run loop asks before starting a trial.
type Gate interface {
	MayStart() (ok bool, reason string)
}

// Options configure a Governor.
type Options struct {
	Config  Config
	Sensors []Sensor
	Sink    EventSink    // nil: events are only logged
	Logger  *slog.Logger // nil: slog.Default()
	// Notifier feeds systemd (READY=1 after the first evaluation, WATCHDOG=1
	// while the heartbeat is fresh). Zero value: no systemd.
	Notifier Notifier
	// HeartbeatPath, when set, gets the heartbeat time once per interval so
	// another process (the CLI's study gate) can check it.
	HeartbeatPath string
}

// Governor polls sensors, evaluates policies, preempts running trials on a
// violation and holds the queue until it clears. It is safe for concurrent
// use; Run must be called once.
type Governor struct {
	cfg      Config
	sensors  []Sensor
	policies []policy
	sink     EventSink
	log      *slog.Logger
	notify   Notifier
	hbPath   string
	// writeBeat writes the heartbeat file: WriteHeartbeat, or a unit test's
	// fake slow disk.
	writeBeat func(path string, at time.Time) error

	beat atomic.Int64 // unix nanos of the last heartbeat

	mu         sync.Mutex
	trials     map[string]*Watch
	stopping   map[string]bool
	latest     map[string]Reading
	readErr    map[string]error
	inflight   map[string]bool
	violations map[string]Verdict
	evaluated  bool
	held       bool
	stale      bool
	stallUntil time.Time
}

// New returns a governor; it does nothing until Run.
func New(opts Options) (*Governor, error) {
	cfg := opts.Config
	if cfg.Policies == nil {
		cfg = DefaultConfig()
	}
	if err := cfg.validate("governor config"); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range opts.Sensors {
		if seen[s.Name()] {
			return nil, fmt.Errorf("governor: two sensors named %q (each name is read by its own policies; give a replacement the same name and drop the original)", s.Name())
		}
		seen[s.Name()] = true
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	sink := opts.Sink
	if sink == nil {
		sink = SlogSink{Logger: lg}
	}
	return &Governor{
		cfg: cfg.Clone(), sensors: slices.Clone(opts.Sensors), policies: buildPolicies(cfg),
		sink: sink, log: lg, notify: opts.Notifier, hbPath: opts.HeartbeatPath, writeBeat: WriteHeartbeat,
		trials: map[string]*Watch{}, stopping: map[string]bool{}, latest: map[string]Reading{},
		readErr: map[string]error{}, inflight: map[string]bool{}, violations: map[string]Verdict{},
	}, nil
}

// Config returns the configuration in force.
func (g *Governor) Config() Config { return g.cfg.Clone() }

// Preemption is why and when a trial was preempted.
type Preemption struct {
	TrialID  string    `json:"trial_id"`
	Policy   string    `json:"policy"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	Readings []Reading `json:"readings,omitempty"`
	StopErr  string    `json:"stop_err,omitempty"`
}

// Watch is the governor's hold on one running trial. The run loop checks
// Cause after the trial ends: non-nil means preempted: do not score, rerun.
type Watch struct {
	g         *Governor
	trial     Trial
	budget    Budget
	once      sync.Once
	preempted chan struct{}
	stopped   chan struct{}
	mu        sync.Mutex
	cause     *Preemption
}

// Preempted is closed when the governor preempts the trial.
func (w *Watch) Preempted() <-chan struct{} { return w.preempted }

// Stopped is closed once a preempted trial's Stop has returned.
func (w *Watch) Stopped() <-chan struct{} { return w.stopped }

// Cause returns the preemption, or nil if the trial was not preempted.
func (w *Watch) Cause() *Preemption {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cause == nil {
		return nil
	}
	c := *w.cause
	return &c
}

// End tells the governor the trial finished on its own. It returns the
// preemption if one came first (the result must then not be scored).
func (w *Watch) End() *Preemption {
	w.g.mu.Lock()
	if w.g.trials[w.trial.ID()] == w {
		delete(w.g.trials, w.trial.ID())
	}
	w.g.mu.Unlock()
	return w.Cause()
}

// Begin registers a trial about to start. It fails with a *HeldError when
// the gate is closed, so a trial cannot slip in between MayStart and start.
func (g *Governor) Begin(t Trial, b Budget) (*Watch, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ok, why := g.mayStartLocked(time.Now()); !ok {
		return nil, &HeldError{Reason: why}
	}
	if _, dup := g.trials[t.ID()]; dup {
		return nil, fmt.Errorf("governor: trial %s is already running", t.ID())
	}
	w := &Watch{g: g, trial: t, budget: b, preempted: make(chan struct{}), stopped: make(chan struct{})}
	g.trials[t.ID()] = w
	return w, nil
}

// MayStart implements Gate: false while any policy is violated, a sensor a
// policy needs is lost, the heartbeat is stale, a preempted runtime is still
// stopping, or before the first evaluation.
func (g *Governor) MayStart() (bool, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mayStartLocked(time.Now())
}

func (g *Governor) mayStartLocked(now time.Time) (bool, string) {
	if !g.evaluated {
		return false, "governor has not evaluated its sensors yet"
	}
	if age := now.Sub(g.Heartbeat()); age > g.staleAfter() {
		return false, fmt.Sprintf("heartbeat stale (%.2fs old, limit %s)", age.Seconds(), g.staleAfter())
	}
	if len(g.violations) > 0 {
		return false, describe(g.violations)
	}
	if len(g.stopping) > 0 {
		return false, "stopping preempted trial " + strings.Join(slices.Sorted(maps.Keys(g.stopping)), ", ")
	}
	return true, ""
}

func describe(vs map[string]Verdict) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(vs)) {
		parts = append(parts, n+": "+vs[n].Reason)
	}
	return strings.Join(parts, "; ")
}

// Heartbeat returns the time of the last heartbeat.
func (g *Governor) Heartbeat() time.Time {
	n := g.beat.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func (g *Governor) staleAfter() time.Duration { return 3 * g.cfg.Heartbeat }

// Stall stops the loop for d: no reads, no evaluation, no heartbeat. It is
// a fault-injection hook for the heartbeat-stall class; the watchdog, which
// runs apart from the loop, must then hold the gate and preempt.
func (g *Governor) Stall(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stallUntil = time.Now().Add(d)
}

// Preempt stops a running trial for a cause found outside the sensors, e.g.
// its record could not be written (policy ReasonRecordWrite).
func (g *Governor) Preempt(ctx context.Context, trialID, policy, reason string) error {
	g.mu.Lock()
	w, ok := g.trials[trialID]
	g.mu.Unlock()
	if !ok {
		return fmt.Errorf("governor: no running trial %s", trialID)
	}
	g.preempt(ctx, w, policy, reason, g.readings())
	return nil
}

// PreemptAll preempts every running trial.
func (g *Governor) PreemptAll(ctx context.Context, policy, reason string) {
	g.mu.Lock()
	ws := slices.Collect(maps.Values(g.trials))
	g.mu.Unlock()
	rs := g.readings()
	for _, w := range ws {
		g.preempt(ctx, w, policy, reason, rs)
	}
}

func (g *Governor) readings() []Reading {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Reading
	for _, n := range slices.Sorted(maps.Keys(g.latest)) {
		out = append(out, g.latest[n])
	}
	return out
}

// preempt marks w preempted once and stops its runtime in the background,
// so the loop keeps evaluating and beating while a runtime takes its grace.
func (g *Governor) preempt(ctx context.Context, w *Watch, policy, reason string, rs []Reading) {
	w.once.Do(func() {
		p := &Preemption{TrialID: w.trial.ID(), Policy: policy, Reason: reason, At: time.Now(), Readings: rs}
		w.mu.Lock()
		w.cause = p
		w.mu.Unlock()
		g.mu.Lock()
		delete(g.trials, p.TrialID)
		g.stopping[p.TrialID] = true
		g.mu.Unlock()
		close(w.preempted)
		g.emit(ctx, Event{At: p.At, Kind: EventPreempt, TrialID: p.TrialID, Policy: policy, Reason: reason, Readings: rs})
		go func() {
			// The stop must finish even when the daemon's context is
			// being cancelled: a half-stopped runtime holds the card.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.Grace+10*time.Second)
			defer cancel()
			err := w.trial.Stop(sctx, g.cfg.Grace)
			ev := Event{At: time.Now(), Kind: EventStopped, TrialID: p.TrialID, Policy: policy}
			if err != nil {
				ev.Kind, ev.Err = EventStopFailed, err.Error()
				w.mu.Lock()
				w.cause.StopErr = err.Error()
				w.mu.Unlock()
			}
			g.emit(sctx, ev)
			g.mu.Lock()
			// A runtime that could not be stopped keeps the gate shut:
			// starting another beside it is how cards get overcommitted.
			if err == nil {
				delete(g.stopping, p.TrialID)
			}
			g.mu.Unlock()
			close(w.stopped)
		}()
	})
}

func (g *Governor) emit(ctx context.Context, e Event) {
	if err := g.sink.Emit(ctx, e); err != nil {
		g.log.Error("governor event not recorded", "kind", e.Kind, "trial", e.TrialID, "err", err)
	}
}

// Run polls until ctx ends. It also runs the watchdog, which is apart from
// the loop so that a stalled loop is noticed.
func (g *Governor) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.watchdog(ctx)
	}()
	defer wg.Wait()
	beats := make(chan time.Time, 1)
	if g.hbPath != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.writeHeartbeats(ctx, beats)
		}()
	}
	tick := time.NewTicker(g.cfg.Poll)
	defer tick.Stop()
	ready := false
	var lastFile time.Time
	for {
		g.mu.Lock()
		stall := time.Until(g.stallUntil)
		g.mu.Unlock()
		if stall > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(stall):
			}
		}
		g.tick(ctx)
		now := time.Now()
		g.beat.Store(now.UnixNano())
		if g.hbPath != "" && now.Sub(lastFile) >= g.cfg.Heartbeat {
			// Handed to the writer, never waited for: the newest beat
			// replaces one not yet written.
			select {
			case <-beats:
			default:
			}
			beats <- now
			lastFile = now
		}
		if !ready {
			ready = true
			if err := g.notify.Notify("READY=1"); err != nil {
				g.log.Warn("sd_notify READY", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// writeHeartbeats writes each beat the loop hands it to the heartbeat file,
// apart from the loop. The file is synced to disk, and a sync was seen to
// take 30 s while other work filled the disk's queue (CI, the fault suite
// beside a full test run): written from the loop, that stalled the beat the
// watchdog reads and preempted a healthy trial as heartbeat-stale. The
// in-process beat is the loop's liveness; the file, what other processes
// read, goes stale only while the disk does.
func (g *Governor) writeHeartbeats(ctx context.Context, beats <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case at := <-beats:
			began := time.Now()
			if err := g.writeBeat(g.hbPath, at); err != nil {
				g.log.Error("governor heartbeat file", "err", err)
			}
			if took := time.Since(began); took > g.staleAfter() {
				g.log.Warn("governor heartbeat file was slow to write: readers of the file saw it stale meanwhile", "took", took.Round(time.Millisecond), "stale_after", g.staleAfter())
			}
		}
	}
}

func (g *Governor) watchdog(ctx context.Context) {
	every := g.cfg.Heartbeat / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hb := g.Heartbeat()
		if hb.IsZero() {
			continue
		}
		age := time.Since(hb)
		g.mu.Lock()
		was := g.stale
		g.stale = age > g.staleAfter()
		now := g.stale
		g.mu.Unlock()
		switch {
		case now && !was:
			reason := fmt.Sprintf("heartbeat %.2fs old (limit %s)", age.Seconds(), g.staleAfter())
			g.emit(ctx, Event{At: time.Now(), Kind: EventStale, Reason: reason})
			g.PreemptAll(ctx, ReasonHeartbeatStale, reason)
		case !now && was:
			g.emit(ctx, Event{At: time.Now(), Kind: EventFresh})
		}
		if !now {
			if err := g.notify.Notify("WATCHDOG=1"); err != nil {
				g.log.Warn("sd_notify WATCHDOG", "err", err)
			}
		}
	}
}

type readResult struct {
	name string
	r    Reading
	err  error
}

// tick reads every sensor at once, each under the read timeout, and then
// evaluates. A sensor whose previous read is still running is not read
// again: it is reported lost instead of piling up goroutines.
func (g *Governor) tick(ctx context.Context) {
	ch := make(chan readResult, len(g.sensors))
	pending := map[string]bool{}
	g.mu.Lock()
	for _, s := range g.sensors {
		n := s.Name()
		if g.inflight[n] {
			g.readErr[n] = errors.New("previous read still running")
			continue
		}
		g.inflight[n] = true
		pending[n] = true
		go func() {
			rctx, cancel := context.WithTimeout(ctx, g.cfg.ReadTimeout)
			defer cancel()
			r, err := s.Read(rctx)
			if err == nil && r.Sensor == "" {
				r.Sensor = n
			}
			g.mu.Lock()
			g.inflight[n] = false
			g.mu.Unlock()
			ch <- readResult{n, r, err}
		}()
	}
	g.mu.Unlock()
	timeout := time.NewTimer(g.cfg.ReadTimeout + 20*time.Millisecond)
	defer timeout.Stop()
	var got []readResult
collect:
	for len(got) < len(pending) {
		select {
		case res := <-ch:
			got = append(got, res)
		case <-timeout.C:
			break collect
		case <-ctx.Done():
			return
		}
	}
	g.mu.Lock()
	for _, res := range got {
		delete(pending, res.name)
		if res.err != nil {
			g.readErr[res.name] = res.err
			continue
		}
		delete(g.readErr, res.name)
		g.latest[res.name] = res.r
	}
	for n := range pending {
		g.readErr[n] = fmt.Errorf("read took longer than %s", g.cfg.ReadTimeout)
	}
	g.mu.Unlock()
	g.evaluate(ctx, time.Now())
}

func (g *Governor) evaluate(ctx context.Context, now time.Time) {
	snap, lost := g.snapshotAt(now)
	found, order := g.verdicts(snap, lost)

	g.mu.Lock()
	prev := g.violations
	g.violations = found
	g.evaluated = true
	wasHeld := g.held
	g.held = len(found) > 0
	ws := slices.Collect(maps.Values(g.trials))
	rs := make([]Reading, 0, len(g.latest))
	for _, n := range slices.Sorted(maps.Keys(g.latest)) {
		rs = append(rs, g.latest[n])
	}
	g.mu.Unlock()

	g.emitChanges(ctx, now, prev, found, order, wasHeld, rs)
	if len(order) == 0 {
		return
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].trial.ID() < ws[j].trial.ID() })
	for _, w := range ws {
		g.preempt(ctx, w, order[0], found[order[0]].Reason, rs)
	}
}

// snapshotAt takes, under g.mu, what the policies judge at now, and why each
// sensor a policy needs is lost, by sensor name: none registered, a read
// error, no reading yet, or a stale one.
func (g *Governor) snapshotAt(now time.Time) (Snapshot, map[string]string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	snap := Snapshot{Now: now, Readings: maps.Clone(g.latest), TrialActive: len(g.trials) > 0}
	for _, w := range g.trials {
		if w.budget.CardMemBytes > 0 {
			snap.Budget = w.budget
		}
	}
	registered := map[string]bool{}
	for _, s := range g.sensors {
		registered[s.Name()] = true
	}
	staleAfter := time.Duration(g.cfg.Policies[PolicySensorLoss].Limit * float64(time.Second))
	lost := map[string]string{}
	for _, p := range g.policies {
		n := p.sensor()
		switch r, have := g.latest[n]; {
		case !registered[n]:
			lost[n] = "no sensor named " + n
		case g.readErr[n] != nil:
			lost[n] = "read error: " + g.readErr[n].Error()
		case !have:
			lost[n] = "no reading yet"
		case now.Sub(r.At) > staleAfter:
			lost[n] = fmt.Sprintf("stale: last reading %.2fs old (limit %.4gs)", now.Sub(r.At).Seconds(), staleAfter.Seconds())
		}
	}
	return snap, lost
}

// verdicts checks every policy against snap and returns the violated ones
// with their names in policy order, sensor-loss first. A policy whose sensor
// is lost counts toward sensor-loss instead, unless it only watches trials
// and none runs.
func (g *Governor) verdicts(snap Snapshot, lost map[string]string) (map[string]Verdict, []string) {
	found := map[string]Verdict{}
	var order []string
	var lossParts []string
	for _, p := range g.policies {
		if why, ok := lost[p.sensor()]; ok {
			if p.trialScoped() && !snap.TrialActive {
				continue
			}
			lossParts = append(lossParts, fmt.Sprintf("%s (needed by %s): %s", p.sensor(), p.name(), why))
			continue
		}
		if v := p.check(snap); v.Violated {
			found[p.name()] = v
			order = append(order, p.name())
		}
	}
	if len(lossParts) > 0 {
		found[PolicySensorLoss] = Verdict{Violated: true, Reason: strings.Join(lossParts, "; ")}
		order = append([]string{PolicySensorLoss}, order...)
	}
	return found, order
}

// emitChanges emits what changed since the last evaluation: a trip for each
// new violation, a clear for each that ended, and a hold or release when the
// governor's state turned.
func (g *Governor) emitChanges(ctx context.Context, now time.Time, prev, found map[string]Verdict, order []string, wasHeld bool, rs []Reading) {
	for _, n := range order {
		if _, was := prev[n]; !was {
			g.emit(ctx, Event{At: now, Kind: EventTrip, Policy: n, Reason: found[n].Reason, Readings: rs})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(prev)) {
		if _, still := found[n]; !still {
			g.emit(ctx, Event{At: now, Kind: EventClear, Policy: n})
		}
	}
	if len(found) > 0 && !wasHeld {
		g.emit(ctx, Event{At: now, Kind: EventHold, Reason: describe(found)})
	}
	if len(found) == 0 && wasHeld {
		g.emit(ctx, Event{At: now, Kind: EventRelease})
	}
}
