package scale

import (
	"context"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
)

// A fleet of 100 synthetic workers on the real dev server: each is a real
// rig worker (its checks, its one card slot, heartbeat, the real runner
// and spool entry) whose runtime sleeps instead of generating, and the
// coordinator is the real one (plan, chunks, the merge with its trust
// checks and re-grade, receipts in a real store). Every worker is busy at
// once, every planned trial ends with exactly one counted receipt and one
// generation row, and no workflow's history nears Temporal's limit. The
// overhead per trial is printed, not held to a time: `rig bench scale
// --fleet 100` measures it at 10,000 trials.
func TestFleetOfSyntheticWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real Temporal dev server and 100 workers (run without -short)")
	}
	if in, err := provision.Load(); err != nil || in.Temporal == "" {
		t.Fatalf("the Temporal CLI is not provisioned (%v): run make setup", err)
	}
	const workers, trials = 100, 2000
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := Fleet(ctx, FleetOptions{Workers: workers, Trials: trials, Hold: 3 * time.Second}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Planned != trials {
		t.Fatalf("the plan has %d trials, not %d", res.Planned, trials)
	}
	if res.Status != "done" || res.Counted != trials || res.Missing != 0 || res.Doubled != 0 {
		t.Errorf("execution %s: %d of %d planned trials with exactly one counted receipt, %d with none, %d with more than one",
			res.Status, res.Counted, trials, res.Missing, res.Doubled)
	}
	if res.DuplicateRows != 0 || res.Rows < trials {
		t.Errorf("generation records: %d rows for %d trials, %d row ids twice", res.Rows, trials, res.DuplicateRows)
	}
	if res.MostInFlight != workers {
		t.Errorf("at most %d trials ran at once on %d workers", res.MostInFlight, workers)
	}
	if len(res.ByWorker) != workers {
		t.Errorf("%d of %d workers ran a trial: %v", len(res.ByWorker), workers, res.ByWorker)
	}
	for id, h := range res.Workflows {
		if h.Events >= 20000 {
			t.Errorf("workflow %s has %d history events (Temporal's limit is 51,200 and rig keeps under 20,000)", id, h.Events)
		}
	}
	if len(res.Overhead) != trials {
		t.Errorf("the histories timed %d of %d trials from scheduling to merge", len(res.Overhead), trials)
	}
}
