package studies

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"rig/tasks"
)

const quickPath = "../examples/quick-study/design.json"

// quickDemoSlots is the slot count `make demo` runs the quick study at: the
// fastest `rig bench slots` measured on a 2-core CPU (1.36× one slot's
// speed at 4, 1.29× at 8; README, "Slots", and docs/runtimes.md).
const quickDemoSlots = 4

// TestQuickExampleIsSmall: `make demo` runs the quick study, which must
// validate as it stands, stay a strict part of the full demo study (the same
// arms with the same pins but for the slots, which the quick demo pins at
// quickDemoSlots, the same bank), and stay small enough to finish in a few
// minutes on a 2-core machine: a few dozen trials, priced under four
// minutes (every output at its stop cap, the dry run's worst case) at the
// speed validation measured on a shared 2-core machine.
func TestQuickExampleIsSmall(t *testing.T) {
	ctx := context.Background()
	d, err := LoadDesign(ctx, quickPath, ValidateOptions{})
	if err != nil {
		t.Fatalf("the quick example does not validate: %v", err)
	}
	full := demoDesign(t)
	fullArms := map[string]Arm{}
	for _, a := range full.Arms {
		fullArms[a.Name] = a
	}
	for _, a := range d.Arms {
		if a.Runtime != "llama-server" {
			t.Errorf("arm %s runs on %s: the quick study keeps to llama-server (Ollama and Aider are what make demo-full long)", a.Name, a.Runtime)
		}
		if a.Pins.Slots != quickDemoSlots {
			t.Errorf("arm %s pins slots %d; the quick demo runs at %d (README, \"Slots\")", a.Name, a.Pins.Slots, quickDemoSlots)
		}
		// The full demo's arms run at one slot (its Aider arms, and its
		// figures, were measured so); the quick demo differs in slots only.
		fa, ok := fullArms[a.Name]
		fa.Pins.Slots = a.Pins.Slots
		if !ok || !reflect.DeepEqual(fa, a) {
			t.Errorf("arm %s is not the full demo study's arm of that name, pins and all (slots aside)", a.Name)
		}
	}
	if len(d.Arms) < 2 || len(d.Arms) > 3 {
		t.Errorf("the quick study has %d arms, want two or three", len(d.Arms))
	}

	bankTasks := map[string][]string{}
	for _, jk := range d.JobKinds {
		if jk.HarnessCaps != nil {
			t.Errorf("job kind %s runs through a harness: the quick study keeps to plain calls", jk.Name)
		}
		path := jk.TaskBank
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(quickPath), path)
		}
		b, err := tasks.LoadBank(path)
		if err != nil {
			t.Fatal(err)
		}
		bankTasks[jk.Name] = SampleByTemplate(b.Select(jk.IncludeHoldout), jk.SampleTasks)
		if n := len(bankTasks[jk.Name]); n != d.Power.TaskCount {
			t.Errorf("job kind %s samples %d tasks, but the power was stated for %d", jk.Name, n, d.Power.TaskCount)
		}
	}
	p, err := NewPlan(d, bankTasks, PlanOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	const maxTrials = 60
	if len(p.Trials) > maxTrials {
		t.Errorf("the quick study plans %d trials, want at most %d", len(p.Trials), maxTrials)
	}

	// What the validation run of llama-server measured on a shared 2-core
	// machine; the counted run there took a minute for 24 of these trials.
	slow := Speed{GenTokensPerSec: 54, PromptTokensPerSec: 166, LoadSeconds: 5, OverheadSeconds: 1, Watts: 35, Source: SourceMeasured}
	speeds := SpeedTable{}
	for _, a := range d.Arms {
		speeds[a.Name] = slow
	}
	e, err := DryRun(d, p, speeds, func(TrialKey) int { return 200 })
	if err != nil {
		t.Fatalf("the dry run refuses the quick study at the measured speed: %v", err)
	}
	// Five minutes: four for the trials and the rest for the fidelity step
	// (each arm's prefill of the reference's 24 outputs).
	if e.WallTime > 5*time.Minute {
		t.Errorf("the quick study is priced at %s at the measured speed, want at most 5m", e.WallTime)
	}
	t.Logf("quick study: %d trials, %d loads, priced at %s at the measured speed", e.Trials, e.Loads, e.WallTime.Round(time.Second))
}
