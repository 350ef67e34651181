package run

import (
	"math"
	"rig/studies"
	"time"
)

// measuredSpeed is what one validation run measured: the runtime's own
// prompt and output timings, and for a harness the time it spent outside
// the model (start-up, reading files, applying the edit). nil when no call
// was timed.
func measuredSpeed(out trialOutput) *studies.Speed {
	var promptTok, outTok int
	var promptDur, outDur, inCalls time.Duration
	for _, c := range out.calls {
		promptTok, promptDur = promptTok+c.Timings.PromptTokens, promptDur+c.Timings.PromptDuration
		outTok, outDur = outTok+c.Timings.OutputTokens, outDur+c.Timings.OutputDuration
		inCalls += c.Wall
	}
	if outTok == 0 || outDur <= 0 || promptTok == 0 || promptDur <= 0 {
		return nil
	}
	sp := &studies.Speed{
		GenTokensPerSec:    float64(outTok) / outDur.Seconds(),
		PromptTokensPerSec: float64(promptTok) / promptDur.Seconds(),
		LoadSeconds:        5,
		Watts:              studies.EstimatedWatts,
		PromptTokens:       float64(out.calls[0].PromptTokens),
		Source:             studies.SourceMeasured,
	}
	if out.aider != nil {
		sp.OverheadSeconds = math.Ceil(max(0, (out.aider.Wall - inCalls).Seconds()))
	}
	return sp
}

// durMS is d in milliseconds, with the fraction a per-token time needs.
func durMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
