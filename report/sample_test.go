package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"rig/analysis"
)

// hostileOutput is a model output that would load a remote image and run a
// script if the report did not escape it.
const hostileOutput = "Sure! <script>alert('x')</script><img src=\"//evil.invalid/pixel.png\" onerror=\"alert(1)\">\n```go\nfunc f() {}\n```\n| a | b |"

// SampleData builds a plausible two-kind study with four and three arms
// for tests and screenshots. Scores are drawn from a seeded generator and
// the summaries are computed from them, so the tables, sweeps and figures
// agree with each other.
func SampleData() Data {
	rng := rand.New(rand.NewPCG(7, 11))
	f := func(v float64) *float64 { return &v }
	i64 := func(v int64) *int64 { return &v }

	type armSpec struct {
		name, runtime, digest string
		baseline              bool
		skill                 float64
		wall                  float64
		mem                   int64
		energy                float64
		source                string
	}
	makeKind := func(name, measure string, gate float64, tasks int, specs []armSpec) Kind {
		k := Kind{
			Name: name, Measure: measure, Direction: "higher",
			Interval: "bootstrap percentile over tasks, 10,000 resamples, seed 7",
			Gate:     gate, BestBar: 0.80, Alpha: 0.05, Detectable: f(0.12),
			Sweep: &Sweep{}, Cost: &CostFigure{Label: "wall time per task (s)"},
		}
		for g := 0.0; g <= 1.0001; g += 0.02 {
			k.Sweep.Gates = append(k.Sweep.Gates, math.Round(g*100)/100)
		}
		scores := make([][]float64, len(specs))
		for i, s := range specs {
			sc := make([]float64, tasks)
			for t := range sc {
				difficulty := float64(t) / float64(tasks)
				v := s.skill - 0.45*difficulty + 0.18*rng.NormFloat64()
				sc[t] = math.Max(0, math.Min(1, v))
			}
			scores[i] = sc
			sorted := slices.Clone(sc)
			slices.Sort(sorted)
			mean := 0.0
			pass := 0
			for _, v := range sc {
				mean += v
				if v >= gate {
					pass++
				}
			}
			mean /= float64(tasks)
			line := SweepLine{Arm: s.name}
			for _, g := range k.Sweep.Gates {
				n := 0
				for _, v := range sc {
					if v >= g {
						n++
					}
				}
				line.PassRate = append(line.PassRate, float64(n)/float64(tasks))
			}
			k.Sweep.Lines = append(k.Sweep.Lines, line)
			k.Arms = append(k.Arms, Arm{
				Arm: s.name, Runtime: s.runtime, Digest: s.digest, Baseline: s.baseline,
				Score:    Interval{Value: mean, Low: mean - 0.05, High: mean + 0.05},
				PassRate: float64(pass) / float64(tasks), Median: sorted[tasks/2], P10: sorted[tasks/10], Worst: sorted[0],
				Tasks: tasks, Trials: 3 * tasks, Preempted: i, Capped: (i + 1) % 3,
				WallSeconds: f(s.wall * float64(tasks)), PeakMemBytes: i64(s.mem), EnergyJoules: f(s.energy), EnergySource: s.source,
			})
			k.Cost.Points = append(k.Cost.Points, CostPoint{Arm: s.name, Cost: s.wall, Score: mean})
		}
		k.Scores = &Scores{}
		for t := range tasks {
			k.Scores.Tasks = append(k.Scores.Tasks, fmt.Sprintf("task-%03d", t))
		}
		for i, s := range specs {
			k.Scores.Arms = append(k.Scores.Arms, s.name)
			vs := make([]*float64, tasks)
			for t := range vs {
				if i > 0 && t == tasks-1 {
					continue // the last task never ran for a challenger: a missing pair
				}
				vs[t] = f(scores[i][t])
			}
			k.Scores.Values = append(k.Scores.Values, vs)
		}
		// P(best) from the skill ordering, normalised to sum to one.
		total := 0.0
		for i := range k.Arms {
			k.Arms[i].PBest = math.Exp(12 * k.Arms[i].Score.Value)
			total += k.Arms[i].PBest
		}
		lead := 0
		for i := range k.Arms {
			k.Arms[i].PBest /= total
			if k.Arms[i].PBest > k.Arms[lead].PBest {
				lead = i
			}
		}
		k.Arms[lead].Tie = k.Arms[lead].PBest < k.BestBar
		base := 0
		for i := 1; i < len(specs); i++ {
			d := k.Arms[i].Score.Value - k.Arms[base].Score.Value
			p := Pair{
				Challenger: specs[i].name, Baseline: specs[base].name,
				Delta: Interval{Value: d, Low: d - 0.07, High: d + 0.07},
				PRaw:  math.Min(1, math.Exp(-40*d*d)*0.9), Test: fmt.Sprintf("exact McNemar (binomial on %d discordant tasks)", 8+3*i),
			}
			p.PHolm = math.Min(1, p.PRaw*float64(len(specs)-i))
			switch {
			case math.Abs(d) < *k.Detectable:
				p.Outcome, p.NotShown = "inconclusive", analysis.NotShownText(d, *k.Detectable)
			case d > 0 && p.PHolm < k.Alpha:
				p.Outcome = "improvement"
			case d < 0 && p.PHolm < k.Alpha:
				p.Outcome = "regression"
			default:
				p.Outcome = "tie"
			}
			k.Pairs = append(k.Pairs, p)
			for t := range tasks {
				b, c := scores[base][t] >= gate, scores[i][t] >= gate
				if b == c || len(k.Paired) >= 4 {
					continue
				}
				row := PairedRow{Task: fmt.Sprintf("task-%03d", t), Challenger: specs[i].name, Baseline: specs[base].name,
					BaselineScore: scores[base][t], ChallengerScore: scores[i][t],
					BaselineOutput:   "def apply(items):\n    return [normalise(i) for i in items if i.valid]\n",
					ChallengerOutput: "def apply(items):\n    out = []\n    for i in items:\n        out.append(normalise(i))\n    return out\n"}
				row.Change = NewlyFixed
				if b {
					row.Change = NewlyFailing
				}
				if len(k.Paired) == 0 {
					row.ChallengerOutput = hostileOutput
				}
				k.Paired = append(k.Paired, row)
			}
			for t := range tasks {
				k.Rows = append(k.Rows, sampleRow(rng, len(k.Pairs)-1, fmt.Sprintf("task-%03d", t), specs[base].name, specs[i].name, scores[base][t] >= gate, scores[i][t] >= gate))
			}
			k.Failures = append(k.Failures,
				Failure{Arm: specs[i].name, Code: "timeout", Count: i},
				Failure{Arm: specs[i].name, Code: "schema_invalid", Count: 2 * i},
				Failure{Arm: specs[base].name, Code: "tests_failed", Count: i + 1})
		}
		return k
	}

	apply := makeKind("apply items", "pass rate", 0.6, 60, []armSpec{
		{"qwen2.5-7b-q4", "ollama 0.17.4", "sha256:8f2c1e9a7b3d4c5e6f708192a3b4c5d6", true, 0.80, 4.2, 6_100_000_000, 5400, "NVML"},
		{"gemma3-4b-q4", "llama-server b6200", "sha256:1a2b3c4d5e6f7a8b9c0d", false, 0.86, 3.1, 4_300_000_000, 3900, "NVML"},
		{"smollm2-1.7b-q8", "llama-server b6200", "sha256:ffeeddccbbaa99887766", false, 0.55, 1.2, 2_000_000_000, 1100, "NVML"},
		{"phi4-mini-q4", "ollama 0.17.4", "sha256:0123456789abcdef0123", false, 0.78, 3.6, 3_900_000_000, 4200, "estimate"},
	})
	edits := makeKind("code edits via Aider", "tests passed (fraction)", 0.5, 40, []armSpec{
		{"qwen2.5-coder-7b", "aider 0.86 → llama-server", "sha256:aa11bb22cc33dd44ee55", true, 0.72, 22, 6_800_000_000, 21000, "RAPL"},
		{"gemma3-4b-q4", "aider 0.86 → llama-server", "sha256:1a2b3c4d5e6f7a8b9c0d", false, 0.70, 15, 4_300_000_000, 14000, "RAPL"},
		{"smollm2-1.7b-q8", "aider 0.86 → llama-server", "sha256:ffeeddccbbaa99887766", false, 0.40, 9, 2_000_000_000, 6000, "estimate"},
	})
	edits.Arms[2].EnergyJoules = nil // not measured: shown as missing, never zero

	return Data{
		Study: "Which local model writes apply items",
		Sentences: Sentences{
			JobKinds:   "Two job kinds: writing apply items (feeds which model the item writer uses) and small code edits through Aider (feeds the default edit model).",
			Candidates: "The incumbent qwen2.5-7b in Ollama against gemma3-4b and smollm2-1.7b in llama-server and phi4-mini in Ollama, each at its pinned quant, context and sampling.",
			Measure:    "Pass rate at the reviewer's gate is what the item writer is judged on in production, so it answers which model to deploy.",
		},
		DesignHash:     "sha256:4be1d0c6a9f3e2b17c85d4a0f6e9b3c2d1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6",
		ComparisonHash: "sha256:9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b",
		GeneratedAt:    time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC),
		Machine:        "NVIDIA H200 141 GiB · driver 580.65 · CUDA 13.0 · Ollama 0.17.4 · llama-server b6200 · aider-chat 0.86.1 · Linux 6.8",
		Licences: []Licence{
			{Item: "gemma3-4b", Entry: "licences/registry.json#gemma-terms-2025-03", Use: "internal evaluation", Verdict: "allowed"},
			{Item: "qwen2.5-7b", Entry: "licences/registry.json#apache-2.0", Use: "internal evaluation", Verdict: "allowed"},
			{Item: "smollm2-1.7b", Entry: "licences/registry.json#apache-2.0", Use: "internal evaluation", Verdict: "allowed"},
			{Item: "phi4-mini", Entry: "licences/registry.json#mit", Use: "internal evaluation", Verdict: "allowed"},
			{Item: "aider-chat", Entry: "licences/registry.json#apache-2.0", Use: "tooling", Verdict: "allowed"},
		},
		Kinds: []Kind{apply, edits},
		Cards: &Cards{Rows: []CardRow{
			{Model: "gemma3-4b-q4", Profile: "24 GiB · ctx 8192 · Q4_K_M · full offload", Fits: true, Verdict: "17.9 GiB margin", PromptTokS: f(2450), GenTokS: f(96.5), Score: f(0.84), PeakMemBytes: i64(4_300_000_000), WallSeconds: f(190), EnergyJoules: f(3900), EnergySource: "NVML"},
			{Model: "gemma3-4b-q4", Profile: "8 GiB · ctx 8192 · Q4_K_M · full offload", Simulated: true, Fits: true, Verdict: "2.1 GiB margin", PromptTokS: f(2390), GenTokS: f(95.1), Score: f(0.83), PeakMemBytes: i64(4_400_000_000), WallSeconds: f(194), EnergyJoules: f(4000), EnergySource: "NVML"},
			{Model: "qwen2.5-7b-q4", Profile: "6 GiB · ctx 8192 · Q4_K_M · full offload", Simulated: true, Fits: false, Verdict: "needs 6.9 GiB; 0.9 GiB short"},
			{Model: "smollm2-1.7b-q8", Profile: "4 GiB · ctx 4096 · Q8_0 · full offload", Simulated: true, Fits: true, Verdict: "1.6 GiB margin", PromptTokS: f(5100), GenTokS: f(180), Score: f(0.52), PeakMemBytes: i64(2_100_000_000), WallSeconds: f(75)},
		}},
		Replay: &Replay{Tolerance: "|Δ log-prob| ≤ 1e-3 per token, top-5", Rows: []ReplayRow{
			{Record: "gen-000017", Arm: "gemma3-4b-q4", Status: Reproduced, MaxDelta: 2.1e-5},
			{Record: "gen-000042", Arm: "qwen2.5-7b-q4", Status: Reproduced, MaxDelta: 4.4e-5},
			{Record: "gen-000108", Arm: "smollm2-1.7b-q8", Status: Mismatch, MaxDelta: 0.31, Detail: "token 12 differs: chosen token not in replay's top-5"},
			{Record: "gen-000131", Arm: "phi4-mini-q4", Status: StackDiffers, MaxDelta: 0, Detail: "llama-server build differs from the pinned b6200; not replayed"},
		}},
		Decision: &Decision{
			Rule:         "For apply items: accept a challenger if its pass-rate delta against the incumbent is > 0 with Holm-adjusted p < 0.05, its P(best) ≥ 0.80, and its wall time per task is at most 1.5× the incumbent's. Otherwise keep the incumbent; if no pair can be read at this sample size, record needs_review.",
			Trace:        []string{"gemma3-4b-q4 vs qwen2.5-7b-q4: Δ +0.05, Holm p 0.41 — not shown", "no challenger meets the rule", "keep the incumbent"},
			Outcome:      "reject (keep the incumbent)",
			Actor:        "studio-staff:mei",
			Rationale:    "No challenger showed a difference the study can detect; the incumbent stays.",
			At:           time.Date(2026, 11, 30, 4, 10, 0, 0, time.UTC),
			NextBaseline: "qwen2.5-7b-q4",
		},
		Warnings: []string{
			"smollm2-1.7b-q8 (code edits via Aider): energy not measured (no RAPL access); shown as missing.",
			"phi4-mini-q4: energy is an estimate from board power × wall time, not a measurement.",
		},
	}
}

var sampleCategories = []string{"christmas", "invoices", "recipes", "addresses", "code review"}

// sampleRow is one row of the paired matrix with plausible receipts: every
// seventh task has a repeat that disagrees, every eleventh a tool error,
// every thirteenth a governor preemption, and the challenger is slow on
// every ninth. The first row's challenger output is hostile.
func sampleRow(rng *rand.Rand, pair int, task, base, chall string, bpass, cpass bool) Row {
	n := 0
	fmt.Sscanf(task[len(task)-3:], "%d", &n)
	side := func(arm string, pass bool, wall float64, attempt int) RowSide {
		s := RowSide{Output: fmt.Sprintf("def apply(items):  # %s on %s\n    return [normalise(i) for i in items]\n", arm, task), Repeats: 3, Passed: 3 * int(b2i(pass)),
			Receipt: &RowReceipt{Trial: arm + "/apply items/" + task + "/1", Attempt: attempt, Outcome: "scored",
				Pins:        map[string]string{"quant": "Q4_K_M", "ctx": "8192", "temperature": "0", "stop_cap": "512"},
				InputTokens: 400 + rng.IntN(200), OutputTokens: 60 + rng.IntN(120), WallSeconds: wall, PeakMemBytes: 4_300_000_000 + rng.Int64N(500_000_000)}}
		if n%5 == 0 {
			s.Replay = Reproduced
		}
		return s
	}
	r := Row{Pair: pair, Task: task, Category: sampleCategories[n%len(sampleCategories)], Tags: []string{fmt.Sprintf("len-%d", n%3)},
		Baseline: side(base, bpass, 3+rng.Float64(), 1), Challenger: side(chall, cpass, 3+rng.Float64(), 1)}
	if n%7 == 0 {
		r.Challenger.Passed = 1
	}
	if n%9 == 0 {
		r.HighCost = true
		r.Challenger.Receipt.WallSeconds *= 2
	}
	if n%11 == 0 {
		r.Challenger.ToolError = true
		r.Challenger.Receipt.Attempt = 2
		r.Challenger.Receipt.Detail = "attempt 1: llama-server exited (signal: killed)"
	}
	if n%13 == 0 {
		r.Baseline.PolicyBlock = true
		r.Baseline.Receipt.Attempt = 2
		r.Baseline.Receipt.GovernorEvents = []string{"preempt: gpu-temp over 85 °C (policy gpu-temp)"}
	}
	if n == 0 {
		r.Challenger.Output = hostileOutput
	}
	return r
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
