package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"rig/governor"
)

// suiteRun is one attempt's runtime in the suite: the real llama-server, or
// a stand-in process with a synthetic token feed for the sensor classes.
type suiteRun struct {
	e        *suiteEnv
	pid      int
	target   governor.Trial
	stand    *standIn
	llama    *llamaServer
	done     <-chan struct{}
	tokens   atomic.Int64
	stopping atomic.Bool
	quit     chan struct{}
	watch    *governor.Watch
	feedWG   sync.WaitGroup
	feedErr  atomic.Value // error from the last call's stream
	ended    bool
	cancel   context.CancelFunc
}

const suitePrompt = "Write a long, detailed story about a lighthouse keeper who collects maps. Chapter one:"

func startRuntime(ctx context.Context, e *suiteEnv, useRuntime bool, real *realRuntime, id string) (*suiteRun, error) {
	r := &suiteRun{e: e, quit: make(chan struct{})}
	if useRuntime {
		s, err := startLlama(ctx, real, e.dir)
		if err != nil {
			return nil, err
		}
		r.llama, r.pid, r.target, r.done = s, s.pid(), s.target(id), s.done()
		return r, nil
	}
	s, err := startStandIn()
	if err != nil {
		return nil, err
	}
	r.stand, r.pid, r.target, r.done = s, s.cmd.Process.Pid, s.target(id), s.done
	return r, nil
}

// follow starts the call: progress begins, tokens flow, and an exit that
// the governor did not cause is reported to the progress sensor, as the
// runtime driver does.
func (r *suiteRun) follow(w *governor.Watch, nTokens int) {
	r.ended = false
	r.tokens.Store(0)
	r.feedErr = atomic.Value{}
	r.watch = w
	r.e.prog.Begin()
	r.e.prog.Track(r.pid)
	go func() {
		select {
		case <-r.done:
			select {
			case <-w.Preempted():
			default:
				if !r.stopping.Load() {
					r.e.prog.Exited()
				}
			}
		case <-r.quit:
		}
	}()
	fctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.feedWG.Add(1)
	go func() {
		defer r.feedWG.Done()
		if r.llama != nil {
			_, err := r.llama.stream(fctx, suitePrompt, nTokens, func() {
				r.e.prog.Tokens(int(r.tokens.Add(1)))
			})
			if err != nil {
				r.feedErr.Store(err)
			}
			return
		}
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for n := 0; n < nTokens; n++ {
			select {
			case <-fctx.Done():
				return
			case <-r.done:
				return
			case <-t.C:
				r.e.prog.Tokens(int(r.tokens.Add(1)))
			}
		}
	}()
}

// warm waits for tokens to flow, then for d of normal operation.
func (r *suiteRun) warm(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(60 * time.Second)
	for r.tokens.Load() < 3 {
		if time.Now().After(deadline) {
			return errors.New("no tokens from the runtime within 60s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.watch.Preempted():
			c := r.watch.Cause()
			return fmt.Errorf("false preemption before the fault, at %d tokens: %s: %s", r.tokens.Load(), c.Policy, c.Reason)
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	return nil
}

// complete lets the call run to its end (the stand-in's feed or the
// server's stop event) and reports a stream error.
func (r *suiteRun) complete(ctx context.Context, d time.Duration) error {
	if err := r.warm(ctx, d); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { r.feedWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		return errors.New("call did not finish within 120s")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r.watch.Preempted():
		c := r.watch.Cause()
		return fmt.Errorf("false preemption at %d tokens: %s: %s", r.tokens.Load(), c.Policy, c.Reason)
	default:
	}
	if err, _ := r.feedErr.Load().(error); err != nil {
		return fmt.Errorf("completion: %w", err)
	}
	return nil
}

// endCall stops the token feed and ends progress.
func (r *suiteRun) endCall() {
	if r.ended {
		return
	}
	r.ended = true
	if r.cancel != nil {
		r.cancel()
	}
	r.feedWG.Wait()
	r.e.prog.End()
	r.e.prog.Track(0)
}

func (r *suiteRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// stop ends the runtime the suite started, if still running.
func (r *suiteRun) stop() {
	r.stopping.Store(true)
	r.endCall()
	close(r.quit)
	if r.exited() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.target.Stop(ctx, 2*time.Second)
}
