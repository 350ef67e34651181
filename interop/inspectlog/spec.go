package inspectlog

import (
	"sort"

	"rig/analysis"
	"rig/genrecord"
	"rig/receipts"
	"rig/studies"
)

// spec is the log's EvalSpec: the job kind as the task, the bank as the
// dataset, the design hash as the revision, the arm's model with every pin.
func spec(x Execution, arm, kind, model string, da studies.Arm, bank Bank, trials []trial, last receipts.Receipt, rows map[string][]genrecord.Row) Spec {
	seen := map[string]bool{}
	var ids []string
	for _, t := range trials {
		if !seen[t.task] {
			seen[t.task] = true
			ids = append(ids, t.task)
		}
	}
	created := trials[0].attempts[0].StartedAt
	for _, t := range trials {
		for _, a := range t.attempts {
			if a.StartedAt.Before(created) {
				created = a.StartedAt
			}
		}
	}
	args := map[string]any{"arm": arm, "model_name": last.ModelName, "model_digest": last.ModelDigest,
		"runtime": last.Runtime, "harness": last.Harness, "harness_version": last.HarnessVersion,
		"effort": map[string]any{"raw_parameter": last.Effort.RawParameter, "value": last.Effort.Value, "graded": last.Effort.Graded}}
	pins := map[string]any{}
	for k, v := range last.Pins {
		pins[k] = v
	}
	args["pins"] = pins
	rig := map[string]any{"study": x.Study, "execution": x.ID, "design_hash": x.DesignHash, "arm": arm, "job_kind": kind,
		"bank": map[string]any{"name": bank.Name, "path": bank.Path, "sha256": bank.Hash}}
	return Spec{
		EvalID: stableID(x.Study, x.ID, arm, kind, "eval"), RunID: stableID(x.Study, x.ID, "run"),
		Created: isoTime(created), Task: kind, TaskID: stableID(x.DesignHash, kind), TaskVersion: bank.Hash,
		TaskAttribs: map[string]any{}, TaskArgs: map[string]any{}, TaskArgsPassed: map[string]any{},
		Dataset: Dataset{Name: bank.Name, Location: "sha256:" + bank.Hash, Samples: len(ids), SampleIDs: ids},
		Model:   model, ModelGenerateConfig: generateConfig(trials, rows), ModelArgs: args,
		Config:   map[string]any{"epochs": maxEpochs(trials), "log_samples": true},
		Revision: &Revision{Type: "git", Origin: "rig design of study " + x.Study, Commit: x.DesignHash},
		Packages: map[string]string{}, Metadata: map[string]any{"rig": rig},
	}
}

func maxEpochs(trials []trial) int {
	per := map[string]int{}
	most := 0
	for _, t := range trials {
		per[t.task]++
		most = max(most, per[t.task])
	}
	return most
}

// generateConfig is the sampling the arm's calls were sent with, read off
// its first kept call (pins hold for the whole run): Inspect's names where
// it has one, the rest in extra_body by the runtime's name.
func generateConfig(trials []trial, rows map[string][]genrecord.Row) map[string]any {
	for _, t := range trials {
		for _, a := range t.attempts {
			calls := rows[callID(a)]
			if len(calls) == 0 {
				continue
			}
			r := calls[0]
			g := map[string]any{"temperature": r.Sampling.Temperature, "top_p": r.Sampling.TopP, "top_k": r.Sampling.TopK,
				"seed": r.Sampling.Seed, "logprobs": true, "top_logprobs": r.K}
			if r.Sampling.MaxTokens > 0 {
				g["max_tokens"] = r.Sampling.MaxTokens
			}
			extra := map[string]any{"min_p": r.Sampling.MinP}
			if r.Sampling.RepeatPenalty != 0 {
				extra["repeat_penalty"] = r.Sampling.RepeatPenalty
			}
			for k, v := range r.Sampling.Extra {
				extra[k] = v
			}
			g["extra_body"] = extra
			return g
		}
	}
	return map[string]any{}
}

// stats is the log's time span and its token usage.
func stats(model string, rs []receipts.Receipt, samples []Sample) Stats {
	first, last := rs[0].StartedAt, rs[0].FinishedAt
	for _, r := range rs {
		if r.StartedAt.Before(first) {
			first = r.StartedAt
		}
		if r.FinishedAt.After(last) {
			last = r.FinishedAt
		}
	}
	var u Usage
	for _, s := range samples {
		u.add(s.ModelUsage[model])
	}
	return Stats{StartedAt: isoTime(first), CompletedAt: isoTime(last), ModelUsage: map[string]Usage{model: u},
		RoleUsage: map[string]Usage{}, ConnectionLimitHistory: []any{}}
}

// results is the ranking measure over the log's samples: Inspect's mean
// over scored samples, the mean over tasks (each task its epochs' mean, as
// rig ranks), and for a pass rate the interval rig's analysis gives it
// (analysis.RateInterval); and each task's reduction over its epochs.
func results(measure, grader string, samples []Sample) (*Results, []Reduction) {
	res := &Results{TotalSamples: len(samples), Scores: []Score{}}
	perTask := map[string][]float64{}
	var order []string
	var sum float64
	scored := 0
	for _, s := range samples {
		if s.Error == nil {
			res.CompletedSamples++
		}
		sc, ok := s.Scores[grader]
		if !ok {
			continue
		}
		scored++
		sum += sc.Value
		if _, ok := perTask[s.ID]; !ok {
			order = append(order, s.ID)
		}
		perTask[s.ID] = append(perTask[s.ID], sc.Value)
	}
	if scored == 0 {
		return res, nil
	}
	sort.Strings(order)
	red := Reduction{Scorer: grader, Reducer: "mean", Samples: []ReducedScore{}}
	ys := make([]float64, 0, len(order))
	for _, id := range order {
		m := meanOf(perTask[id])
		ys = append(ys, m)
		red.Samples = append(red.Samples, ReducedScore{Value: m, SampleID: id, History: []any{}})
	}
	metrics := map[string]Metric{
		"mean":      {Name: "mean", Value: sum / float64(scored), Params: map[string]any{}},
		"task_mean": {Name: "task_mean", Value: meanOf(ys), Params: map[string]any{"tasks": len(ys)}},
	}
	if iv := analysis.RateInterval(ys, scored, 0.95); measure == "pass_rate" && iv.Lo.Valid() && iv.Hi.Valid() {
		p := map[string]any{"level": iv.Level, "method": string(iv.Method)}
		metrics["ci_lower"] = Metric{Name: "ci_lower", Value: float64(iv.Lo), Params: p}
		metrics["ci_upper"] = Metric{Name: "ci_upper", Value: float64(iv.Hi), Params: p}
	}
	res.Scores = append(res.Scores, Score{Name: grader, Scorer: grader, Reducer: "mean", ScoredSamples: scored,
		UnscoredSamples: len(samples) - scored, Params: map[string]any{"ranking_measure": measure}, Metrics: metrics})
	return res, []Reduction{red}
}

func meanOf(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
