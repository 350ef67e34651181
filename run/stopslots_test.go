package run

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"rig/analysis"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/receipts"
)

// stoppingRun is one execution of the early-stopping slice at a slot
// count, run to its end.
type stoppingRun struct {
	info  ExecInfo
	seq   analysis.Sequential
	keys  []string // the trials with a counted receipt, sorted
	calls *concurrency
}

// runStoppingAt runs a quick study whose stopping rule settles at its
// first look: the demo's two llama-server arms made one model, with a stop
// cap of 2 tokens (no answer fits, so both arms fail every task: every task
// is concordant whatever a batched generation changes; with a cap of 16,
// one run under load had a task pass on one arm only and looked on), 9
// tasks at one repeat (a block holds 8 tasks, studies.DefaultBatchSize: a
// block of 16 trials, the first look, then one of 2), and a futility rule
// that 8 concordant tasks settle (anytime, futility
// difference 0.5 at beta 0.49, the pilot's discordance 0.5: 5 suffice).
// A task pairs only once all its repeats ran, so one repeat: with two, the
// first look would pair none.
func runStoppingAt(t *testing.T, ctx context.Context, in provision.Installed, slots int) stoppingRun {
	t.Helper()
	env, snap, d, dir := freezeDemoSlice(t, ctx, in, func(m map[string]any) {
		m["job_kinds"].([]any)[0].(map[string]any)["sample_tasks"] = 9
		m["repeats"] = 1
		m["stopping"] = map[string]any{"method": "anytime", "futility": map[string]any{"difference": 0.5, "beta": 0.49}}
		arms := m["arms"].([]any)
		first := arms[0].(map[string]any)
		for _, a := range arms {
			am := a.(map[string]any)
			am["model"] = first["model"]
			pins := am["pins"].(map[string]any)
			pins["quant"] = first["pins"].(map[string]any)["quant"]
			pins["stop_cap"] = 2
			if slots > 1 {
				pins["slots"] = slots
			}
		}
	})
	c := &concurrency{}
	env.Launch = c.launch
	// One seed for both slot counts, so one plan (the slot count is in the
	// design's hash, from which a seed would otherwise be drawn).
	st, exec := frozenExecutionSeeded(t, ctx, dir, d, snap, "frozen for the stopping-at-slots test", 45)
	h := runToEnd(t, ctx, env, Spec{Study: d.Name, Snapshot: snap, Store: st, Exec: exec, Dir: filepath.Join(dir, "executions", exec.ID)})
	r := stoppingRun{info: h.Info(), calls: c}
	if r.info.Error != "" {
		t.Fatalf("slots %d: the execution ended %s: %s", slots, r.info.Status, r.info.Error)
	}
	raw, found, err := st.Stop(ctx, exec.ID)
	if err != nil || !found {
		t.Fatalf("slots %d: no stored look (%v)", slots, err)
	}
	if err := json.Unmarshal(raw, &r.seq); err != nil {
		t.Fatal(err)
	}
	counted, err := st.Counted(ctx, exec.ID)
	if err != nil {
		t.Fatal(err)
	}
	for k := range counted {
		r.keys = append(r.keys, fmt.Sprintf("%s/%s#%d", k.Arm, k.TaskID, k.Repeat))
	}
	slices.Sort(r.keys)
	return r
}

// TestEarlyStopLooksAtTheSamePointsAtOneAndFourSlots runs one quick study
// with a stopping rule on the real llama-server at slots 4 and at slots 1,
// on one plan: four trials of an arm in flight at once finish in whatever
// order the runtime serves them, and the rule still looks at the same
// points in plan order (the end of each block, over every trial of the
// block) and decides the same at each: the same path of looks, the stop at
// the first, the same trials run and the same trials not run.
func TestEarlyStopLooksAtTheSamePointsAtOneAndFourSlots(t *testing.T) {
	testenv.Long(t, "starts llama-server twice")
	in, err := provision.Load()
	testenv.NeedsSetup(t, "rig's provisioned runtimes and models", err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	four := runStoppingAt(t, ctx, in, 4)
	one := runStoppingAt(t, ctx, in, 1)

	if four.calls.max < 2 || four.calls.max > 4 {
		t.Errorf("at slots 4, at most %d calls were in flight at once: want 2 to 4 (the trials of a block in flight together)", four.calls.max)
	}
	if one.calls.max != 1 {
		t.Errorf("at slots 1, %d calls were in flight at once", one.calls.max)
	}
	for _, r := range []struct {
		slots int
		run   stoppingRun
	}{{4, four}, {1, one}} {
		s := r.run.seq
		if r.run.info.Status != string(receipts.StoppedEarly) || !s.StoppedEarly || !s.Look.Stop || s.Look.Check != 0 {
			t.Errorf("slots %d: status %s, stopped early %v at check %d (stop %v): want stopped_early at the first look; %s",
				r.slots, r.run.info.Status, s.StoppedEarly, s.Look.Check, s.Look.Stop, DescribeStop(s))
		}
		// The first look is over the whole first block: every one of its 8
		// tasks paired, none left in flight.
		if len(s.Look.Pairs) != 1 || s.Look.Pairs[0].Tasks != 8 || len(s.Look.Pairs[0].Path) != 1 {
			t.Errorf("slots %d: the look is over %+v, want one pair with the first block's 8 tasks and one point on its path", r.slots, s.Look.Pairs)
		}
		if len(r.run.keys) != 16 || len(s.NotRun) != 2 {
			t.Errorf("slots %d: %d trials counted and %d not run, want 16 and 2 (the first block run, the second not)", r.slots, len(r.run.keys), len(s.NotRun))
		}
	}
	// The same looks and decisions, to the statistics: the rule was fed
	// the same trials in plan order at each look.
	// Compared as recorded (JSON), where a statistic that is not a number
	// equals itself.
	a, _ := json.Marshal(four.seq)
	b, _ := json.Marshal(one.seq)
	if string(a) != string(b) {
		t.Errorf("the stopping rule's record differs:\nslots 4: %s\nslots 1: %s", a, b)
	}
	if !slices.Equal(four.keys, one.keys) {
		t.Errorf("different trials ran:\nslots 4: %v\nslots 1: %v", four.keys, one.keys)
	}
	t.Logf("slots 4: %d calls at once at most; both: %s", four.calls.max, DescribeStop(four.seq))
}
