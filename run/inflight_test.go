package run

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rig/analysis"
	"rig/genrecord"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
)

// concurrency counts the calls in flight on the runtimes an execution
// starts, and the slots each was started with.
type concurrency struct {
	mu       sync.Mutex
	now, max int
	slots    []int
}

// launch starts the build's own server, as Env.launch does, and wraps it.
func (c *concurrency) launch(ctx context.Context, b runtimes.Build, cfg runtimes.Config) (runtimes.Runtime, error) {
	c.mu.Lock()
	c.slots = append(c.slots, cfg.Slots)
	c.mu.Unlock()
	rt, err := b.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return countedRuntime{Runtime: rt, c: c}, nil
}

type countedRuntime struct {
	runtimes.Runtime
	c *concurrency
}

func (r countedRuntime) Generate(ctx context.Context, req runtimes.Request) (runtimes.Result, error) {
	r.c.mu.Lock()
	r.c.now++
	r.c.max = max(r.c.max, r.c.now)
	r.c.mu.Unlock()
	defer func() {
		r.c.mu.Lock()
		r.c.now--
		r.c.mu.Unlock()
	}()
	return r.Runtime.Generate(ctx, req)
}

// sliceRun is one execution of the demo's llama-server slice at a slot
// count, run to its end through Start.
type sliceRun struct {
	design   *studies.Design
	info     ExecInfo
	receipts []receipts.Receipt
	calls    *concurrency
	look     string // the stopping rule's stored look
}

func runSliceAt(t *testing.T, ctx context.Context, in provision.Installed, slots, tasks int) sliceRun {
	t.Helper()
	env, snap, d, dir := freezeDemoSlice(t, ctx, in, func(m map[string]any) {
		m["job_kinds"].([]any)[0].(map[string]any)["sample_tasks"] = tasks
		// Two repeats are two blocks, so the stopping rule looks twice.
		m["repeats"] = 2
		m["stopping"] = map[string]any{"method": "anytime"}
		if slots > 1 {
			for _, a := range m["arms"].([]any) {
				a.(map[string]any)["pins"].(map[string]any)["slots"] = slots
			}
		}
	})
	c := &concurrency{}
	env.Launch = c.launch
	// The slot count is in the design's hash, so in the plan seed derived
	// from it: both runs are held to one seed, so to one plan.
	st, exec := frozenExecutionSeeded(t, ctx, dir, d, snap, "frozen for the slots test", 45)
	h := runToEnd(t, ctx, env, Spec{Study: d.Name, Snapshot: snap, Store: st, Exec: exec, Dir: filepath.Join(dir, "executions", exec.ID)})
	info := h.Info()
	if info.Status != string(receipts.Done) || info.Error != "" {
		t.Fatalf("slots %d: execution ended %s (%s)", slots, info.Status, info.Error)
	}
	rs, err := st.Receipts(ctx, exec.ID)
	if err != nil {
		t.Fatal(err)
	}
	look, found, err := st.Stop(ctx, exec.ID)
	if err != nil || !found {
		t.Fatalf("slots %d: no stored look (%v)", slots, err)
	}
	return sliceRun{design: d, info: info, receipts: rs, calls: c, look: string(look)}
}

// TestSlotsKeepTrialsInFlight runs the demo's two llama-server arms with
// pins.slots 2 on the real llama-server: each runtime is started with two
// slots and reports them, two trials of an arm are in flight at once, each
// trial has one receipt and one generation row that no other trial shares,
// every receipt's record sum is a cut of its arm's record, and the grades
// and the stopping rule's looks are those of the same plan at one slot
// (temperature 0).
func TestSlotsKeepTrialsInFlight(t *testing.T) {
	in, err := provision.Load()
	testenv.NeedsSetup(t, "rig's provisioned runtimes and models", err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const tasks = 3
	two := runSliceAt(t, ctx, in, 2, tasks)
	one := runSliceAt(t, ctx, in, 1, tasks)

	want := len(two.design.Arms) * tasks * 2
	if two.info.Planned != want || two.info.Done != want {
		t.Fatalf("planned %d, done %d, want %d each", two.info.Planned, two.info.Done, want)
	}
	for _, s := range two.calls.slots {
		if s != 2 {
			t.Errorf("a runtime was started with %d slots, want 2", s)
		}
	}
	if two.calls.max != 2 {
		t.Errorf("at most %d calls were in flight at once, want 2", two.calls.max)
	}
	if one.calls.max != 1 {
		t.Errorf("at one slot, %d calls were in flight at once", one.calls.max)
	}

	// One receipt per trial, each a counted first attempt; two of an arm
	// overlapped in time.
	seen := map[receipts.TrialKey]bool{}
	overlapped := false
	for i, r := range two.receipts {
		if seen[r.Trial()] || r.Attempt != 1 || !r.Outcome.Counted() {
			t.Errorf("receipt %s attempt %d %s: want one counted first attempt per trial", r.Trial(), r.Attempt, r.Outcome)
		}
		seen[r.Trial()] = true
		if r.Pins["slots"] != "2" || r.Pins["runtime_slots"] != "2" {
			t.Errorf("receipt %s: pins slots %q, runtime_slots %q, want 2 and 2", r.Trial(), r.Pins["slots"], r.Pins["runtime_slots"])
		}
		for _, o := range two.receipts[i+1:] {
			if o.Arm == r.Arm && o.StartedAt.Before(r.FinishedAt) && r.StartedAt.Before(o.FinishedAt) {
				overlapped = true
			}
		}
	}
	if len(seen) != want {
		t.Errorf("%d trials have receipts, want %d", len(seen), want)
	}
	if !overlapped {
		t.Error("no two receipts of an arm overlap in time: the trials ran one at a time")
	}

	// The record: one row per trial, none twice, and each receipt's sum a
	// cut of its arm's record after its own row.
	for _, a := range two.design.Arms {
		path := filepath.Join(two.info.Records, "generations-"+a.Name+".jsonl")
		_, rows, err := genrecord.ReadAll(path)
		if err != nil || len(rows) != 2*tasks {
			t.Fatalf("arm %s: %d generation rows (%v), want %d", a.Name, len(rows), err, 2*tasks)
		}
		ids := map[string]bool{}
		for _, row := range rows {
			if ids[row.RowID] {
				t.Errorf("arm %s: row %s is in the record twice", a.Name, row.RowID)
			}
			ids[row.RowID] = true
		}
		cuts, _, err := genrecord.LineSums(path)
		if err != nil {
			t.Fatal(err)
		}
		at := map[string]int{}
		for i, s := range cuts {
			at[s] = i
		}
		used := map[int]bool{}
		for _, r := range two.receipts {
			if r.Arm != a.Name {
				continue
			}
			n, ok := at[r.GenerationSHA256]
			if !ok || used[n] {
				t.Errorf("receipt %s: its record sum is not a cut of the record of its own (line %d, already used %v)", r.Trial(), n, used[n])
			}
			used[n] = true
		}
	}

	// The same grades at one slot and at two.
	pass := map[receipts.TrialKey]bool{}
	for _, r := range one.receipts {
		pass[r.Trial()] = r.Grade != nil && r.Grade.Pass
	}
	if len(pass) != want {
		t.Fatalf("at one slot, %d trials have receipts, want %d", len(pass), want)
	}
	for _, r := range two.receipts {
		got := r.Grade != nil && r.Grade.Pass
		if p, ok := pass[r.Trial()]; !ok || p != got {
			t.Errorf("trial %s: pass %v at two slots, %v at one", r.Trial(), got, p)
		}
	}

	// The monitor was fed in plan order: the same looks, the same path.
	var seq analysis.Sequential
	if err := json.Unmarshal([]byte(two.look), &seq); err != nil {
		t.Fatal(err)
	}
	if seq.Look.Check != 1 || len(seq.Look.Pairs) != 1 || seq.Look.Pairs[0].Tasks != tasks {
		t.Errorf("two slots: the last look is check %d over %+v, want the second, over %d paired tasks", seq.Look.Check, seq.Look.Pairs, tasks)
	}
	if two.look != one.look {
		t.Errorf("the stopping rule's look differs:\ntwo slots: %s\none slot:  %s", two.look, one.look)
	}
}

// preemptFirst is gates that preempt the first trial watched, once, a
// moment after it starts.
type preemptFirst struct {
	mu     sync.Mutex
	target string        // the call id preempted
	fired  chan struct{} // closed once it was
}

func (g *preemptFirst) Ready(context.Context) error { return nil }

func (g *preemptFirst) Watch(_ context.Context, trial string, _ *runtimes.Sandbox, _ uint64) (TrialGuard, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.target != "" {
		return fakeGuard{}, nil
	}
	g.target = trial
	done := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(done); close(g.fired) })
	return preemptingGuard{done}, nil
}

type preemptingGuard struct{ done chan struct{} }

func (p preemptingGuard) Preempted() <-chan struct{} { return p.done }
func (p preemptingGuard) End() string {
	select {
	case <-p.done:
		return "test: preempted on purpose"
	default:
		return ""
	}
}

// heldRuntime holds every call until the gates' preemption has fired, so
// that both trials of the round are surely in flight when it does.
type heldRuntime struct {
	runtimes.Runtime
	fired <-chan struct{}
}

func (r heldRuntime) Generate(ctx context.Context, req runtimes.Request) (runtimes.Result, error) {
	select {
	case <-r.fired:
	case <-ctx.Done():
		return runtimes.Result{}, ctx.Err()
	}
	return r.Runtime.Generate(ctx, req)
}

// TestSlotsPreemptionPreemptsTheRound: with two trials in flight on one
// runtime, the governor's preemption of one preempts the other; both are
// rerun as their own attempts on a fresh runtime, and each trial ends with
// exactly one counted receipt.
func TestSlotsPreemptionPreemptsTheRound(t *testing.T) {
	in, err := provision.Load()
	testenv.NeedsSetup(t, "rig's provisioned runtimes and models", err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, snap, d, dir := freezeDemoSlice(t, ctx, in, func(m map[string]any) {
		for _, a := range m["arms"].([]any) {
			a.(map[string]any)["pins"].(map[string]any)["slots"] = 2
		}
	})
	gates := &preemptFirst{fired: make(chan struct{})}
	env.Gates = gates
	starts := 0
	env.Launch = func(ctx context.Context, b runtimes.Build, cfg runtimes.Config) (runtimes.Runtime, error) {
		starts++
		rt, err := b.Start(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return heldRuntime{Runtime: rt, fired: gates.fired}, nil
	}
	st, exec := frozenExecution(t, ctx, dir, d, snap, "frozen for the preemption test")
	h := runToEnd(t, ctx, env, Spec{Study: d.Name, Snapshot: snap, Store: st, Exec: exec, Dir: filepath.Join(dir, "executions", exec.ID)})
	info := h.Info()
	want := 2 * len(d.Arms)
	if info.Status != string(receipts.Done) || info.Error != "" || info.Done != want || info.Preempted != 2 {
		t.Fatalf("execution ended %s (%s), done %d, preempted %d; want done, %d done and 2 preempted", info.Status, info.Error, info.Done, info.Preempted, want)
	}
	if starts != len(d.Arms)+1 {
		t.Errorf("the runtimes were started %d times, want %d (a fresh one after the preemption)", starts, len(d.Arms)+1)
	}
	rs, err := st.Receipts(ctx, exec.ID)
	if err != nil {
		t.Fatal(err)
	}
	byTrial := map[receipts.TrialKey][]receipts.Receipt{}
	for _, r := range rs {
		byTrial[r.Trial()] = append(byTrial[r.Trial()], r)
	}
	if len(byTrial) != want {
		t.Fatalf("%d trials have receipts, want %d", len(byTrial), want)
	}
	beside, rerun := 0, 0
	for k, rs := range byTrial {
		if len(rs) == 1 && rs[0].Outcome.Counted() && rs[0].Attempt == 1 {
			continue // a trial of the round after the preemption
		}
		rerun++
		counted := 0
		for _, r := range rs {
			switch {
			case r.Outcome.Counted():
				counted++
				if r.Attempt != 2 || r.ParentAttempt != 1 {
					t.Errorf("trial %s: counted attempt %d (parent %d), want 2 rerunning 1", k, r.Attempt, r.ParentAttempt)
				}
			case r.Outcome == receipts.Preempted:
				if r.Attempt != 1 {
					t.Errorf("trial %s: preempted attempt %d, want 1", k, r.Attempt)
				}
				if strings.Contains(r.Detail, "beside it on the same runtime") {
					beside++
				}
			default:
				t.Errorf("trial %s: a receipt %s (%s)", k, r.Outcome, r.Detail)
			}
		}
		if counted != 1 || len(rs) != 2 {
			t.Errorf("trial %s: %d receipts, %d counted; want a preempted one and one counted", k, len(rs), counted)
		}
	}
	if rerun != 2 {
		t.Errorf("%d trials were rerun, want the 2 in flight at the preemption", rerun)
	}
	if beside != 1 {
		t.Errorf("%d receipts say a trial beside them was preempted, want the one not preempted itself", beside)
	}
}
