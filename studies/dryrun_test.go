package studies

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func demoSpeeds() SpeedTable {
	return SpeedTable{
		"smollm2-llama-server":       {GenTokensPerSec: 200, PromptTokensPerSec: 2000, LoadSeconds: 2, Watts: 100, Source: SourceMeasured},
		"smollm2-q8-ollama":          {GenTokensPerSec: 100, PromptTokensPerSec: 1000, LoadSeconds: 3, Watts: 120, MeanOutputTokens: 80, Source: SourcePilot},
		"smollm2-q8-llama-server":    {GenTokensPerSec: 120, PromptTokensPerSec: 1200, LoadSeconds: 2, Watts: 110, Source: SourceMeasured},
		"smollm2-aider-llama-server": {GenTokensPerSec: 200, PromptTokensPerSec: 2000, LoadSeconds: 2, OverheadSeconds: 3, Watts: 100, Source: SourceMeasured},
		"smollm2-q8-aider-ollama":    {GenTokensPerSec: 100, PromptTokensPerSec: 1000, LoadSeconds: 3, OverheadSeconds: 3, Watts: 120, Source: SourcePilot},
	}
}

func TestDryRunPrices(t *testing.T) {
	d := demoDesign(t)
	p, err := NewPlan(d, demoTasks(10, 4), PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	e, err := DryRun(d, p, demoSpeeds(), func(TrialKey) int { return 400 })
	if err != nil {
		t.Fatalf("DryRun: %v", err)
	}
	if e.Trials != len(p.Trials) || e.Loads != p.Loads {
		t.Errorf("priced %d trials and %d loads, plan has %d and %d", e.Trials, e.Loads, len(p.Trials), p.Loads)
	}
	// Price one arm by hand: smollm2 on llama-server, output at its stop cap.
	var smol ArmCost
	for _, c := range e.Arms {
		if c.Arm == "smollm2-llama-server" {
			smol = c
		}
	}
	perTrial := 400.0/2000 + float64(d.Arms[0].Pins.StopCap)/200
	wantSecs := float64(smol.Trials)*perTrial + float64(smol.Loads)*2
	if got := smol.WallTime.Seconds(); got < wantSecs-0.01 || got > wantSecs+0.01 {
		t.Errorf("smollm2 priced %.2fs, want %.2fs", got, wantSecs)
	}
	if wantWh := wantSecs * 100 / 3600; smol.EnergyWh < wantWh-1e-6 || smol.EnergyWh > wantWh+1e-6 {
		t.Errorf("smollm2 energy %.4f Wh, want %.4f", smol.EnergyWh, wantWh)
	}
	if want := 10 * d.Repeats; !smol.AtStopCap || smol.Trials != want {
		t.Errorf("smollm2 cost %+v: want %d trials priced at the stop cap", smol, want)
	}
	var buf bytes.Buffer
	if err := e.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"smollm2-llama-server", SourcePilot, SourceMeasured + ", output at stop cap", "total", "cap", "nothing was executed"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestDryRunOverBudget(t *testing.T) {
	d := demoDesign(t)
	d.Budget.WallTime = "1m"
	p, err := NewPlan(d, demoTasks(10, 4), PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	e, err := DryRun(d, p, demoSpeeds(), nil)
	var ob *OverBudgetError
	if !errors.As(err, &ob) || !errors.Is(err, ErrOverBudget) {
		t.Fatalf("DryRun = %v, want over budget", err)
	}
	if e == nil || e.WallTime <= time.Minute {
		t.Errorf("estimate %+v should come back with the refusal", e)
	}
	if !strings.Contains(err.Error(), "cap 1m0s") || !strings.Contains(err.Error(), "nothing was run") {
		t.Errorf("refusal %q does not say the cap and that nothing ran", err)
	}
	d.Budget.WallTime, d.Budget.EnergyWh = "10h", 0.01
	if _, err := DryRun(d, p, demoSpeeds(), nil); !errors.Is(err, ErrOverBudget) || !strings.Contains(err.Error(), "energy") {
		t.Errorf("energy over cap: %v", err)
	}
}

func TestDryRunRefusesBadSpeeds(t *testing.T) {
	d := demoDesign(t)
	p, err := NewPlan(d, demoTasks(3, 2), PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	missing := demoSpeeds()
	delete(missing, "smollm2-q8-ollama")
	if _, err := DryRun(d, p, missing, nil); !errors.Is(err, ErrNoSpeed) || !strings.Contains(err.Error(), "smollm2-q8-ollama") {
		t.Errorf("missing speed: %v", err)
	}
	badSource := demoSpeeds()
	s := badSource["smollm2-q8-ollama"]
	s.Source = "guess"
	badSource["smollm2-q8-ollama"] = s
	if _, err := DryRun(d, p, badSource, nil); err == nil || !strings.Contains(err.Error(), `"guess"`) {
		t.Errorf("unlabelled speed: %v", err)
	}
}

func TestParseSpeedTable(t *testing.T) {
	good := `{"a": {"gen_tokens_per_sec": 10, "prompt_tokens_per_sec": 100, "load_seconds": 1, "overhead_seconds": 0, "watts": 50, "source": "pilot"}}`
	st, err := ParseSpeedTable("speeds.json", []byte(good))
	if err != nil || st["a"].GenTokensPerSec != 10 || st["a"].Source != SourcePilot {
		t.Fatalf("ParseSpeedTable = %+v, %v", st, err)
	}
	for _, bad := range []string{
		`{"a": {"gen_tokens_per_sec": 10, "source": "guess"}}`,
		`{"a": {"gen_tokens": 10, "source": "pilot"}}`,
		`{"a": `,
		`{} {}`,
	} {
		if _, err := ParseSpeedTable("speeds.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "speeds.json") {
			t.Errorf("ParseSpeedTable(%s) = %v, want an error naming the file", bad, err)
		}
	}
}

func FuzzParseSpeedTable(f *testing.F) {
	f.Add([]byte(`{"a": {"gen_tokens_per_sec": 10, "prompt_tokens_per_sec": 100, "source": "measured on this machine"}}`))
	f.Add([]byte(`{"a": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseSpeedTable("speeds.json", data)
		if err != nil {
			return
		}
		for arm, s := range st {
			if s.Source != SourcePilot && s.Source != SourceMeasured {
				t.Fatalf("arm %q accepted with source %q", arm, s.Source)
			}
		}
	})
}

// TestSpeedTableErrorsUseTheFilesKeys: a bad speeds file is reported with
// the file, the arm and the JSON key the user wrote, never a Go field name.
func TestSpeedTableErrorsUseTheFilesKeys(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string
	}{
		{"zero rate", `{"gemma": {"gen_tokens_per_sec": 0, "prompt_tokens_per_sec": 100, "source": "pilot"}}`,
			[]string{"speeds.json: gemma.gen_tokens_per_sec: 0 must be above 0", "tokens per second"}},
		{"missing rate", `{"gemma": {"gen_tokens_per_sec": 9, "source": "pilot"}}`,
			[]string{"speeds.json: gemma.prompt_tokens_per_sec: 0 must be above 0", "a missing key reads as 0"}},
		{"negative watts", `{"gemma": {"gen_tokens_per_sec": 9, "prompt_tokens_per_sec": 100, "watts": -1, "source": "pilot"}}`,
			[]string{"speeds.json: gemma.watts: -1 must be 0 or more"}},
		{"string for a number", `{"gemma": {"gen_tokens_per_sec": "fast", "source": "pilot"}}`,
			[]string{"speeds.json: gemma.gen_tokens_per_sec: a JSON string where a number belongs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpeedTable("speeds.json", []byte(tc.data))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			for _, goName := range []string{"GenTokensPerSec", "PromptTokensPerSec", "Watts:", "Speed."} {
				if strings.Contains(err.Error(), goName) {
					t.Errorf("error %q names the Go field %q", err, goName)
				}
			}
		})
	}
	// A table built in code (a measured speed) is checked by DryRun the same way.
	d := demoDesign(t)
	p, err := NewPlan(d, demoTasks(3, 2), PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	speeds := demoSpeeds()
	s := speeds["smollm2-q8-ollama"]
	s.GenTokensPerSec = 0
	speeds["smollm2-q8-ollama"] = s
	if _, err := DryRun(d, p, speeds, nil); err == nil || !strings.Contains(err.Error(), "smollm2-q8-ollama.gen_tokens_per_sec: 0 must be above 0") || strings.Contains(err.Error(), "GenTokensPerSec") {
		t.Errorf("DryRun with a zero rate: %v", err)
	}
}
