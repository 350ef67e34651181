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

// TestQuickExampleIsSmall: `make demo` runs the quick study, which must
// validate as it stands, stay a strict part of the full demo study (the same
// arms with the same pins, the same bank), and stay small enough to finish
// in a few minutes on a 2-core machine: a few dozen trials, priced under
// four minutes (every output at its stop cap, the dry run's worst case) at
// the speed validation measured on a shared 2-core machine.
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
		if fa, ok := fullArms[a.Name]; !ok || !reflect.DeepEqual(fa, a) {
			t.Errorf("arm %s is not the full demo study's arm of that name, pins and all", a.Name)
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
	if e.WallTime > 4*time.Minute {
		t.Errorf("the quick study is priced at %s at the measured speed, want at most 4m", e.WallTime)
	}
	t.Logf("quick study: %d trials, %d loads, priced at %s at the measured speed", e.Trials, e.Loads, e.WallTime.Round(time.Second))
}
