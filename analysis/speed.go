package analysis

import (
	"math"
	"sort"
)

// Speed is one arm's speed card in one job kind: the runtime's own timings
// over its scored trials (prompt and generation tokens per second, time to
// first token and time per output token) beside its cost, each with its
// relative change against the incumbent's. The decision rule never reads
// these; a guardrail reads the receipt's fields (receipt.ttft_ms, …).
type Speed struct {
	JobKind string `json:"job_kind"`
	Arm     string `json:"arm"`
	// Timed counts the scored trials whose runtime reported its timings
	// (an arm whose harness hides them has none: its figures are NaN).
	Timed int `json:"timed"`
	// PromptTokS and GenTokS are medians of the per-trial rates.
	PromptTokS Num `json:"prompt_tok_s"`
	GenTokS    Num `json:"gen_tok_s"`
	TTFTP50MS  Num `json:"ttft_p50_ms"`
	TTFTP99MS  Num `json:"ttft_p99_ms"`
	TPOTP50MS  Num `json:"tpot_p50_ms"`
	TPOTP99MS  Num `json:"tpot_p99_ms"`
	// Cost is the arm's wall time, peak memory and energy (costOf), and
	// its Load: the slot count and throughput beside these latencies.
	Cost Cost `json:"cost"`
	// Delta holds each figure's (arm − incumbent)/incumbent; nil for the
	// incumbent itself and when the design names none.
	Delta *SpeedDelta `json:"delta,omitempty"`
}

// SpeedDelta is a Speed's relative change against the incumbent's, per
// figure; NaN where either side is unmeasured.
type SpeedDelta struct {
	PromptTokS Num `json:"prompt_tok_s"`
	GenTokS    Num `json:"gen_tok_s"`
	TTFTP50    Num `json:"ttft_p50"`
	TTFTP99    Num `json:"ttft_p99"`
	TPOTP50    Num `json:"tpot_p50"`
	TPOTP99    Num `json:"tpot_p99"`
	Wall       Num `json:"wall"`
	OutputTokS Num `json:"output_tok_s"` // throughput: every slot together
	PeakMemory Num `json:"peak_memory"`
	Energy     Num `json:"energy"`
}

// speeds are the speed cards of every ranked arm in every job kind.
func speeds(d Design, trials []Trial, kinds []KindResult) []Speed {
	var out []Speed
	for _, k := range kinds {
		var inc *Speed
		if d.Incumbent != "" {
			s := speedOf(trials, d.Incumbent, k.JobKind)
			inc = &s
		}
		for _, a := range k.Arms {
			s := speedOf(trials, a.Arm, k.JobKind)
			if inc != nil && a.Arm != d.Incumbent {
				s.Delta = &SpeedDelta{
					PromptTokS: relChange(s.PromptTokS, inc.PromptTokS), GenTokS: relChange(s.GenTokS, inc.GenTokS),
					TTFTP50: relChange(s.TTFTP50MS, inc.TTFTP50MS), TTFTP99: relChange(s.TTFTP99MS, inc.TTFTP99MS),
					TPOTP50: relChange(s.TPOTP50MS, inc.TPOTP50MS), TPOTP99: relChange(s.TPOTP99MS, inc.TPOTP99MS),
					Wall:       relChange(s.Cost.MeanWallSeconds, inc.Cost.MeanWallSeconds),
					OutputTokS: relChange(s.Cost.Load.OutputTokS, inc.Cost.Load.OutputTokS),
					PeakMemory: relChange(Num(s.Cost.value(CostMemory)), Num(inc.Cost.value(CostMemory))),
					Energy:     relChange(s.Cost.MeanEnergyJoules, inc.Cost.MeanEnergyJoules),
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// speedOf reads one arm's scored trials in one job kind.
func speedOf(trials []Trial, arm, kind string) Speed {
	s := Speed{JobKind: kind, Arm: arm, Cost: costOf(trials, arm, kind)}
	var prompt, gen, ttft, tpot []float64
	for _, t := range trials {
		if !scoredTrial(t, arm, kind) {
			continue
		}
		if t.PromptTokS > 0 || t.GenTokS > 0 || t.TTFTMS > 0 || t.TPOTMS > 0 {
			s.Timed++
		}
		prompt, gen = appendPositive(prompt, t.PromptTokS), appendPositive(gen, t.GenTokS)
		ttft, tpot = appendPositive(ttft, t.TTFTMS), appendPositive(tpot, t.TPOTMS)
	}
	for _, v := range [][]float64{prompt, gen, ttft, tpot} {
		sort.Float64s(v)
	}
	s.PromptTokS, s.GenTokS = Num(quantile(prompt, 0.5)), Num(quantile(gen, 0.5))
	s.TTFTP50MS, s.TTFTP99MS = Num(quantile(ttft, 0.5)), Num(quantile(ttft, 0.99))
	s.TPOTP50MS, s.TPOTP99MS = Num(quantile(tpot, 0.5)), Num(quantile(tpot, 0.99))
	return s
}

func appendPositive(v []float64, x float64) []float64 {
	if x > 0 {
		return append(v, x)
	}
	return v
}

// relChange is (v − base)/base; NaN when either is unmeasured or base is 0.
func relChange(v, base Num) Num {
	if !v.Valid() || !base.Valid() || base == 0 {
		return Num(math.NaN())
	}
	return Num((float64(v) - float64(base)) / float64(base))
}
