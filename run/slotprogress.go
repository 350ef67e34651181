package run

import (
	"context"
	"time"

	"rig/runtimes"
)

// slotReporter is a runtime that reports each of its slots' progress
// (llama-server's GET /slots).
type slotReporter interface {
	SlotReport(ctx context.Context) ([]runtimes.SlotState, error)
}

// progressFeeder is a trial guard that takes the trial's own progress, so
// that the governor watches each slot and not only the runtime's process,
// whose CPU time advances while any slot does.
type progressFeeder interface {
	Progress(total int)
}

// slotPoll is how often a trial's slot is read: well inside the governor's
// token-gap limits, and a small GET beside a batch's generation.
const slotPoll = 250 * time.Millisecond

// feedSlotProgress feeds the guard the progress of the trial's slot, as the
// runtime reports it, until the returned stop is called. It does nothing
// for a trial alone (slot 0), a runtime with no slot report (Ollama, or a
// harness whose calls pick their own slot) or a guard that takes none: the
// governor then reads the runtime's process as a whole.
func feedSlotProgress(ctx context.Context, rt runtimes.Runtime, guard TrialGuard, slot int) (stop func()) {
	sr, reports := rt.(slotReporter)
	feed, takes := guard.(progressFeeder)
	if slot <= 0 || !reports || !takes {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(slotPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			slots, err := sr.SlotReport(ctx)
			if err != nil {
				continue // the next read, or the runtime-crash policy, says more
			}
			for _, s := range slots {
				if s.ID == slot-1 && s.Processing {
					feed.Progress(s.Progress())
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}
