package run

import (
	"testing"
	"time"

	"rig/runtimes"
	"rig/studies"
)

// A validation run's speed comes from the runtime's own timings, and a
// harness's start-up time is what its wall spent outside the model.
func TestMeasuredSpeedFromAValidationRun(t *testing.T) {
	call := runtimes.Result{PromptTokens: 1200, Wall: 12 * time.Second, Timings: runtimes.Timings{
		PromptTokens: 1200, PromptDuration: 4 * time.Second, OutputTokens: 64, OutputDuration: 8 * time.Second}}
	sp := measuredSpeed(trialOutput{calls: []runtimes.Result{call}, aider: &runtimes.AiderResult{Wall: 20 * time.Second}})
	if sp == nil {
		t.Fatal("no speed from a timed call")
	}
	if sp.GenTokensPerSec != 8 || sp.PromptTokensPerSec != 300 || sp.PromptTokens != 1200 || sp.OverheadSeconds != 8 || sp.Source != studies.SourceMeasured {
		t.Errorf("speed %+v, want 8 tok/s out, 300 tok/s prompt, 1200 prompt tokens, 8 s harness start", *sp)
	}
	if measuredSpeed(trialOutput{}) != nil {
		t.Error("a run with no call measured a speed")
	}
}
