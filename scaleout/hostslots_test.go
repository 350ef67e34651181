package scaleout

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rig/internal/layout"
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/runtimes"
	"rig/studies"
)

// heldRuntime is a fake runtime (the stub of redteam_forge_test.go) whose
// calls wait until released, counting how many it holds at once.
type heldRuntime struct {
	stubRuntime
	mu       sync.Mutex
	now      int
	most     int
	released chan struct{}
}

func (h *heldRuntime) Generate(ctx context.Context, req runtimes.Request) (runtimes.Result, error) {
	h.mu.Lock()
	h.now++
	h.most = max(h.most, h.now)
	h.mu.Unlock()
	defer func() { h.mu.Lock(); h.now--; h.mu.Unlock() }()
	select {
	case <-h.released:
	case <-ctx.Done():
		return runtimes.Result{}, ctx.Err()
	}
	return h.stubRuntime.Generate(ctx, req)
}

func (h *heldRuntime) holding() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// A worker's Host runs an arm of slots 2 two trials at once on one runtime
// (a fake here: the engine's run is TestScaleOutWorkerServesItsArmsSlots),
// refuses a third while both run (ErrBusy, nothing recorded), and leaves
// each trial its own scored receipt.
func TestHostRunsAnArmsSlotsAtOnce(t *testing.T) {
	_, f, spool := mergeFixture(t)
	ctx := context.Background()
	bin, sum := stubFrozenBinary(t, &f, 2)
	rt := &heldRuntime{released: make(chan struct{}), stubRuntime: stubRuntime{pins: runtimes.Pins{Stack: runtimes.Stack{Runtime: "llama-server", RuntimeVersion: "b1",
		BinarySHA256: sum, Libraries: map[string]string{}}, ModelName: "m", ModelSHA256: modelSHA, Slots: 2, Machine: runtimes.Machine{CPU: "stub", Cores: 1}}, text: "Paris"}}
	starts := 0
	launch := func(context.Context, runtimes.Build, runtimes.Config) (runtimes.Runtime, error) {
		starts++
		return rt, nil
	}
	h, err := run.NewHost(run.Env{Gates: openGates{}, Installed: provision.Installed{LlamaServer: bin}, Launch: launch},
		run.HostSpec{Study: "s1", Snapshot: f.snap, Exec: receipts.Execution{ID: "exec-2"}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if h.Slots("a") != 2 {
		t.Fatalf("the host says arm a has %d slots, want 2", h.Slots("a"))
	}
	dir := func(k studies.TrialKey) string {
		return string(layout.Records(filepath.Join(spool, "s1", "exec-2", "trials", entryName(k.String(), 1, "w1"))))
	}
	keys := []studies.TrialKey{{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 1}, {Arm: "a", JobKind: "qa", Task: "capital", Repeat: 2}}
	results := make([]run.HostedResult, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = h.RunTrial(ctx, k, 1, 0, dir(k))
		}()
	}
	waitFor(t, "both trials held in the runtime at once", 10*time.Second, func() bool { return rt.holding() == 2 })
	third := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "sum", Repeat: 1}
	if _, err := h.RunTrial(ctx, third, 1, 0, dir(third)); !errors.Is(err, run.ErrBusy) {
		t.Errorf("a third trial while both slots run: %v, want ErrBusy", err)
	}
	close(rt.released)
	wg.Wait()
	for i, k := range keys {
		if errs[i] != nil || results[i].Receipt.Outcome != receipts.Scored || results[i].Receipt.Pins["slots"] != "2" {
			t.Errorf("trial %s: %v, outcome %s, pins slots %q", k, errs[i], results[i].Receipt.Outcome, results[i].Receipt.Pins["slots"])
		}
	}
	if starts != 1 || rt.most != 2 {
		t.Errorf("%d runtime starts and %d calls at once; want one runtime serving 2", starts, rt.most)
	}
	// Once they ended, the third runs on the runtime kept up.
	if res, err := h.RunTrial(ctx, third, 1, 0, dir(third)); err != nil || res.Receipt.Outcome == "" || starts != 1 {
		t.Errorf("the third trial after both ended: %+v, %v, %d starts", res.Receipt.Outcome, err, starts)
	}
}
