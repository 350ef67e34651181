package harnesslog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"rig/analysis"
)

// Evidence is how a comparison of imported logs is labelled wherever it is
// printed or written.
const Evidence = "imported evidence: per-sample logs another harness wrote; rig ran nothing, so there are no receipts, no replay and no decision record"

// Comparison is rig's paired analysis of two logs of the same tasks.
type Comparison struct {
	Evidence string `json:"evidence"`
	Format   Format `json:"format"`
	// A and B are the two logs' sources and the arm names the analysis
	// gives them (B is the candidate against A).
	A Side `json:"a"`
	B Side `json:"b"`
	// Metrics are the compared task × metric families, in the analysis's
	// job-kind order; each is one row of Holm's family.
	Metrics []Metric `json:"metrics"`
	// Unpaired counts the samples of each log with no partner in the other.
	UnpairedA int `json:"unpaired_a"`
	UnpairedB int `json:"unpaired_b"`
	// Skipped names metrics left out and why (values outside [0, 1]).
	Skipped []string         `json:"skipped,omitempty"`
	Report  *analysis.Report `json:"analysis"`
}

// Side is one log of a comparison.
type Side struct {
	Source  string `json:"source"`
	Model   string `json:"model"`
	Arm     string `json:"arm"`
	Samples int    `json:"samples"`
}

// Metric is one task × metric family: its measure and how many items pair.
type Metric struct {
	Name    string           `json:"name"`
	Task    string           `json:"task"`
	Metric  string           `json:"metric"`
	Measure analysis.Measure `json:"measure"`
	Pairs   int              `json:"pairs"`
}

// Compare pairs a's and b's samples by task, item and repeat (refusing a
// pair whose content hashes differ: not the same item) and analyses every
// task × metric both give on [0, 1]: a metric that is only ever 0 or 1 as a
// pass rate (exact McNemar, Wilson and Tango intervals), any other as a
// score (sign-flip test, bootstrap intervals). Holm runs across them all.
func Compare(ctx context.Context, a, b Log) (*Comparison, error) {
	armA, armB := "A: "+a.Model, "B: "+b.Model
	if armA == armB || a.Model == "" {
		armA, armB = "A", "B"
	}
	c := &Comparison{Evidence: Evidence, Format: a.Format,
		A: Side{Source: a.Source, Model: a.Model, Arm: armA, Samples: len(a.Samples)},
		B: Side{Source: b.Source, Model: b.Model, Arm: armB, Samples: len(b.Samples)}}
	other := map[string]Sample{}
	for _, s := range b.Samples {
		other[s.key()] = s
	}
	type family struct {
		task, metric string
		as, bs       []Sample
	}
	fams := map[string]*family{}
	paired := map[string]bool{}
	for _, sa := range a.Samples {
		sb, ok := other[sa.key()]
		if !ok {
			c.UnpairedA++
			continue
		}
		if sa.Hash != "" && sb.Hash != "" && sa.Hash != sb.Hash {
			return nil, fmt.Errorf("task %s item %s: %s and %s hold different content there (doc_hash %s vs %s): the logs are not of the same tasks", sa.Task, sa.ID, a.Source, b.Source, short(sa.Hash), short(sb.Hash))
		}
		paired[sa.key()] = true
		for m := range sa.Metrics {
			if _, ok := sb.Metrics[m]; !ok {
				continue
			}
			name := sa.Task + "/" + m
			f, ok := fams[name]
			if !ok {
				f = &family{task: sa.Task, metric: m}
				fams[name] = f
			}
			f.as, f.bs = append(f.as, sa), append(f.bs, sb)
		}
	}
	c.UnpairedB = len(b.Samples) - len(paired)
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	design := analysis.Design{Arms: []analysis.Arm{{Name: armA}, {Name: armB}}, Incumbent: armA,
		Pairs: []analysis.Pair{{Candidate: armB, Baseline: armA}}, Interval: analysis.BCa, Seed: 1}
	var trials []analysis.Trial
	for _, n := range names {
		f := fams[n]
		measure, ok := measureOf(f.metric, f.as, f.bs)
		if !ok {
			c.Skipped = append(c.Skipped, fmt.Sprintf("%s: values outside [0, 1] (rig compares pass rates and scores in [0, 1])", n))
			continue
		}
		design.JobKinds = append(design.JobKinds, analysis.JobKind{Name: n, Measure: measure})
		c.Metrics = append(c.Metrics, Metric{Name: n, Task: f.task, Metric: f.metric, Measure: measure, Pairs: len(f.as)})
		for i := range f.as {
			trials = append(trials, trial(armA, n, f.as[i], f.metric), trial(armB, n, f.bs[i], f.metric))
		}
	}
	if len(design.JobKinds) == 0 {
		return nil, fmt.Errorf("%s and %s share no paired item with a metric in [0, 1] (%d and %d samples, %d paired): are they logs of the same tasks?", a.Source, b.Source, len(a.Samples), len(b.Samples), len(paired))
	}
	design.Hash = inputHash(design, trials)
	for i := range trials {
		trials[i].DesignHash = design.Hash
	}
	rep, err := analysis.Analyse(ctx, analysis.Input{Design: design, Trials: trials})
	if err != nil {
		return nil, err
	}
	c.Report = rep
	return c, nil
}

func trial(arm, kind string, s Sample, metric string) analysis.Trial {
	v := s.Metrics[metric]
	return analysis.Trial{Arm: arm, JobKind: kind, Task: s.ID, Repeat: s.Repeat, Score: v, Pass: v >= 1}
}

// measureOf is a metric's measure: pass when every value is 0 or 1, score
// when all lie in [0, 1]; ok is false otherwise.
func measureOf(m string, as, bs []Sample) (analysis.Measure, bool) {
	binary := true
	for _, ss := range [][]Sample{as, bs} {
		for _, s := range ss {
			v := s.Metrics[m]
			if v < 0 || v > 1 {
				return "", false
			}
			if v != 0 && v != 1 {
				binary = false
			}
		}
	}
	if binary {
		return analysis.MeasurePass, true
	}
	return analysis.MeasureScore, true
}

// inputHash stands in for a design hash: the comparison has no design,
// and the analysis names its input by this hash of what it compared.
func inputHash(d analysis.Design, trials []analysis.Trial) string {
	h := sha256.New()
	for _, k := range d.JobKinds {
		fmt.Fprintf(h, "%s|%s\n", k.Name, k.Measure)
	}
	for _, t := range trials {
		fmt.Fprintf(h, "%s|%s|%s|%d|%g\n", t.Arm, t.JobKind, t.Task, t.Repeat, t.Score)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
