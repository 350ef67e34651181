package studies

import (
	"strings"
	"testing"
	"time"
)

// The demo's fix-test is bound by turns and tokens, and its wall is derived
// from the measured speed: a machine half as fast gets a wall about twice as
// long, so the same caps censor the same work on both.
func TestAutoWallFollowsTheMeasuredSpeed(t *testing.T) {
	d := demoDesign(t)
	if got := d.AutoWallJobKinds(); len(got) != 1 || got[0] != "fix-test" {
		t.Fatalf("auto-wall job kinds of the demo: %v, want [fix-test]", got)
	}
	fast := Speed{GenTokensPerSec: 20, PromptTokensPerSec: 200, OverheadSeconds: 8, PromptTokens: 1500, Source: SourceMeasured}
	slow := fast
	slow.GenTokensPerSec, slow.PromptTokensPerSec, slow.OverheadSeconds = 10, 100, 16
	table := func(s Speed) SpeedTable {
		out := SpeedTable{}
		for _, a := range d.Arms {
			out[a.Name] = s
		}
		return out
	}
	onFast, err := DeriveWalls(d, table(fast))
	if err != nil {
		t.Fatal(err)
	}
	onSlow, err := DeriveWalls(d, table(slow))
	if err != nil {
		t.Fatal(err)
	}
	f, s := onFast["fix-test"], onSlow["fix-test"]
	if ratio := float64(s.Wall) / float64(f.Wall); ratio < 1.9 || ratio > 2.1 {
		t.Errorf("wall on a machine half as fast: %s against %s (ratio %.2f), want about 2", s.Wall, f.Wall, ratio)
	}
	if f.Margin != AutoWallMargin || f.Wall < time.Duration(AutoWallMargin*float64(f.WorstCase)) {
		t.Errorf("wall %s is under %.0f× the worst case %s", f.Wall, AutoWallMargin, f.WorstCase)
	}
	// 2 turns of 512 tokens, stopped at 512 total after the first: the
	// worst case writes 512+511 tokens (the token cap never cuts a call).
	if !strings.Contains(f.Why, "2 turns, ≤ 1023 output tokens") {
		t.Errorf("derivation %q does not state the caps it priced", f.Why)
	}
	if caps := d.AiderCapsFor("fix-test"); caps.Turns != 2 || caps.Tokens != 512 {
		t.Errorf("the work caps moved with the wall: %+v", caps)
	}
}

// The slowest arm sets the one wall every arm of the job kind gets.
func TestAutoWallIsTheSlowestArms(t *testing.T) {
	d := demoDesign(t)
	speeds := SpeedTable{}
	for _, a := range d.Arms {
		speeds[a.Name] = Speed{GenTokensPerSec: 30, PromptTokensPerSec: 300, PromptTokens: 1500, Source: SourceMeasured}
	}
	speeds["smollm2-q8-aider-ollama"] = Speed{GenTokensPerSec: 3, PromptTokensPerSec: 60, PromptTokens: 1500, Source: SourceMeasured}
	walls, err := DeriveWalls(d, speeds)
	if err != nil {
		t.Fatal(err)
	}
	if w := walls["fix-test"]; w.Slowest != "smollm2-q8-aider-ollama" {
		t.Errorf("wall set by %s, want the slowest arm smollm2-q8-aider-ollama (%s)", w.Slowest, w)
	}
}

// Without a measured speed there is no wall to derive: the error names the
// arm, the key and both ways on.
func TestAutoWallWithoutASpeedSaysWhatToRun(t *testing.T) {
	d := demoDesign(t)
	speeds := SpeedTable{"smollm2-aider-llama-server": {GenTokensPerSec: 30, PromptTokensPerSec: 300, Source: SourceMeasured}}
	_, err := DeriveWalls(d, speeds)
	if err == nil {
		t.Fatal("derived a wall with no speed for smollm2-q8-aider-ollama")
	}
	for _, want := range []string{"fix-test", "harness_caps.wall", "smollm2-q8-aider-ollama", "rig study validate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
