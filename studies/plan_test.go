package studies

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func demoTasks(nExtract, nFix int) map[string][]string {
	out := map[string][]string{}
	for i := range nExtract {
		out["extract-json"] = append(out["extract-json"], fmt.Sprintf("ej-%02d", i))
	}
	for i := range nFix {
		out["fix-test"] = append(out["fix-test"], fmt.Sprintf("ft-%02d", i))
	}
	return out
}

func TestPlanCoversEveryTrialOnce(t *testing.T) {
	d := demoDesign(t)
	tasks := demoTasks(20, 7)
	for _, bs := range []int{1, 3, 8, 100} {
		t.Run(fmt.Sprintf("batch %d", bs), func(t *testing.T) {
			p, err := NewPlan(d, tasks, PlanOptions{Seed: 7, BatchSize: bs})
			if err != nil {
				t.Fatal(err)
			}
			want := map[TrialKey]bool{}
			for _, jk := range d.JobKinds {
				for _, ai := range d.ArmsFor(jk.Name) {
					for _, task := range tasks[jk.Name] {
						for r := 1; r <= d.Repeats; r++ {
							want[TrialKey{Arm: d.Arms[ai].Name, JobKind: jk.Name, Task: task, Repeat: r}] = true
						}
					}
				}
			}
			if len(p.Trials) != len(want) {
				t.Fatalf("%d trials, want %d", len(p.Trials), len(want))
			}
			for _, tr := range p.Trials {
				if !want[tr.Key] {
					t.Fatalf("unexpected or repeated trial %s", tr.Key)
				}
				delete(want, tr.Key)
			}
			// Each block runs each of its arms in one stretch: at most one load per arm.
			if maxLoads := p.Blocks * 3; p.Loads > maxLoads {
				t.Errorf("%d loads for %d blocks, want at most %d", p.Loads, p.Blocks, maxLoads)
			}
		})
	}
}

func TestPlanSeeded(t *testing.T) {
	d := demoDesign(t)
	tasks := demoTasks(12, 6)
	a, err := NewPlan(d, tasks, PlanOptions{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewPlan(d, tasks, PlanOptions{Seed: 42})
	c, _ := NewPlan(d, tasks, PlanOptions{Seed: 43})
	if a.Hash != b.Hash {
		t.Error("same seed, different plans")
	}
	if a.Hash == c.Hash {
		t.Error("different seeds, same plan")
	}
	if a.Seed != 42 {
		t.Errorf("plan records seed %d, want 42", a.Seed)
	}
}

func TestPlanInterleavesArms(t *testing.T) {
	d := demoDesign(t)
	d.Repeats = 6
	p, err := NewPlan(d, demoTasks(16, 0), PlanOptions{Seed: 1, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	orders := map[string]int{}
	firsts := map[string]int{}
	block, order := -1, []string{}
	flush := func() {
		if len(order) > 0 {
			orders[strings.Join(order, ",")]++
			firsts[order[0]]++
		}
	}
	for _, tr := range p.Trials {
		if tr.Block != block {
			flush()
			block, order = tr.Block, nil
		}
		if len(order) == 0 || order[len(order)-1] != tr.Key.Arm {
			order = append(order, tr.Key.Arm)
		}
	}
	flush()
	// 24 blocks of 3 arms: every arm should open some block, and the orders vary.
	for _, ai := range d.ArmsFor("extract-json") {
		if firsts[d.Arms[ai].Name] == 0 {
			t.Errorf("arm %s never opens a block: drift would always fall on the others (%v)", d.Arms[ai].Name, firsts)
		}
	}
	if len(orders) < 3 {
		t.Errorf("only %d distinct arm orders across %d blocks", len(orders), p.Blocks)
	}
	for o := range orders {
		if strings.Count(o, ",") != 2 {
			t.Errorf("block order %q: an arm's batch was split", o)
		}
	}
}

func TestPlanBatchTradeOff(t *testing.T) {
	d := demoDesign(t)
	tasks := demoTasks(24, 8)
	fine, _ := NewPlan(d, tasks, PlanOptions{Seed: 3, BatchSize: 1})
	coarse, _ := NewPlan(d, tasks, PlanOptions{Seed: 3, BatchSize: 24})
	if fine.Loads <= coarse.Loads {
		t.Errorf("batch 1 loads %d, whole-bank batch loads %d: finer interleaving should cost more loads", fine.Loads, coarse.Loads)
	}
}

func TestPlanRefuses(t *testing.T) {
	d := demoDesign(t)
	if _, err := NewPlan(d, map[string][]string{}, PlanOptions{}); !errors.Is(err, ErrEmptyPlan) {
		t.Errorf("no tasks: %v, want ErrEmptyPlan", err)
	}
	dup := demoTasks(3, 1)
	dup["extract-json"] = append(dup["extract-json"], "ej-01")
	if _, err := NewPlan(d, dup, PlanOptions{}); err == nil || !strings.Contains(err.Error(), `"ej-01"`) {
		t.Errorf("duplicate task: %v", err)
	}
	if _, err := NewPlan(d, demoTasks(3, 1), PlanOptions{BatchSize: -1}); err == nil {
		t.Error("negative batch size accepted")
	}
}

func TestTrialKeyRoundTrip(t *testing.T) {
	tests := []struct {
		in      string
		want    TrialKey
		wantErr bool
	}{
		{in: "gemma3-ollama/extract-json/ej-01/2", want: TrialKey{"gemma3-ollama", "extract-json", "ej-01", 2}},
		{in: "a/fix-test/repo/case/1", want: TrialKey{"a", "fix-test", "repo/case", 1}},
		{in: "a/b/c", wantErr: true},
		{in: "a/b/c/0", wantErr: true},
		{in: "a//c/1", wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParseTrialKey(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseTrialKey(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want || got.String() != tc.in {
			t.Errorf("ParseTrialKey(%q) = %+v, %v", tc.in, got, err)
		}
	}
}

// A call id is the form records already on disk carry, so a receipt still
// finds its row; a rerun's row is its own.
func TestTrialKeyCallID(t *testing.T) {
	k := TrialKey{"a", "fix-test", "repo/case", 2}
	if got := k.CallID(3); got != "a/fix-test/repo/case/2#3" {
		t.Errorf("CallID(3) = %q, want the stored form a/fix-test/repo/case/2#3", got)
	}
	if k.CallID(1) == k.CallID(2) {
		t.Error("two attempts share a call id")
	}
}

// Each attempt of a snapshot gets its own plan order, and the same attempt
// always the same one, so a resumed execution rebuilds the plan it started.
func TestPlanSeedPerAttempt(t *testing.T) {
	first, second := PlanSeed("snap1", 1), PlanSeed("snap1", 2)
	if first == second {
		t.Error("attempts share a plan seed")
	}
	if again := PlanSeed("snap1", 1); again != first {
		t.Error("plan seed is not reproducible: a resumed execution would rebuild another plan")
	}
	if PlanSeed("snap2", 1) == first {
		t.Error("two snapshots share a plan seed")
	}
}

func BenchmarkNewPlan(b *testing.B) {
	d := demoDesign(b)
	tasks := demoTasks(500, 200)
	for b.Loop() {
		if _, err := NewPlan(d, tasks, PlanOptions{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
