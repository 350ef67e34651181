package stats

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"

	"rig/analysis"
)

// BenchOptions sizes the statistics self-check behind `rig bench stats`.
// Zero values take the defaults noted on each field.
type BenchOptions struct {
	Seed uint64
	// NullStudies is how many 8-arm null studies are analysed in full (500).
	NullStudies int
	// NullTasks is the task count of each null study (100).
	NullTasks int
	// CoverageSims and CoverageResamples size the interval-coverage check
	// (2000 simulated studies of CoverageTasks=100 tasks, 2000 resamples each).
	CoverageSims, CoverageResamples, CoverageTasks int
	// PowerSims sizes the power check (4000 simulated studies of PowerTasks=200).
	PowerSims, PowerTasks int
	// PassCoverage sizes the coverage grid of the pass-rate intervals (its
	// defaults: 2000 studies a cell over the full grid); its seed is Seed.
	PassCoverage CoverageOptions
}

func (o BenchOptions) withDefaults() BenchOptions {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.NullStudies, 500)
	def(&o.NullTasks, 100)
	def(&o.CoverageSims, 2000)
	def(&o.CoverageResamples, 2000)
	def(&o.CoverageTasks, 100)
	def(&o.PowerSims, 4000)
	def(&o.PowerTasks, 200)
	return o
}

// Check is one measured property against its bar.
type Check struct {
	Name string  `json:"name"`
	Got  float64 `json:"got"`
	Want string  `json:"want"`
	Pass bool    `json:"pass"`
	// SE is the Monte Carlo standard error of Got.
	SE float64 `json:"se"`
}

// BenchResult is the outcome of BenchStats; Pass is true when every check passed.
type BenchResult struct {
	Checks []Check `json:"checks"`
	Pass   bool    `json:"pass"`
}

// BenchStats measures the analysis against simulated truth: (a) under the
// null with 8 identical arms, how often the decision rule declares any
// winner (at most 5%), and how often the ranking crowns a "best"; (b) the
// bootstrap interval's coverage against its nominal level (within 1.5
// points, percentile and BCa); (c) the pass-rate intervals' coverage over
// the grid of PassCoverage (mean within 1.5 points, lowest cell at least
// 93.5% less two Monte Carlo standard errors), with the grid printed;
// (d) analysis.McNemarPower's prediction against the
// simulated detection rate (within 3 points). It prints a table to w. A
// failed check is reported in the result, not as an error; errors are for
// cancellation and write failures.
func BenchStats(ctx context.Context, w io.Writer, opts BenchOptions) (BenchResult, error) {
	o := opts.withDefaults()
	var res BenchResult
	add := func(c Check) error {
		res.Checks = append(res.Checks, c)
		mark := "ok"
		if !c.Pass {
			mark = "FAIL"
		}
		_, err := fmt.Fprintf(w, "%-58s %8.4f  (MC se %.4f)  want %-22s %s\n", c.Name, c.Got, c.SE, c.Want, mark)
		return err
	}
	if _, err := fmt.Fprintf(w, "rig bench stats (seed %d)\n", o.Seed); err != nil {
		return res, err
	}
	winner, best, err := nullRates(ctx, o)
	if err != nil {
		return res, err
	}
	n := float64(o.NullStudies)
	if err := add(Check{Name: fmt.Sprintf("null, 8 identical arms: any winner declared (%d studies)", o.NullStudies), Got: winner, SE: math.Sqrt(winner * (1 - winner) / n), Want: "≤ 0.05", Pass: winner <= 0.05}); err != nil {
		return res, err
	}
	if err := add(Check{Name: "null, 8 identical arms: ranking verdict \"best\"", Got: best, SE: math.Sqrt(best * (1 - best) / n), Want: "≤ 0.05", Pass: best <= 0.05}); err != nil {
		return res, err
	}
	for _, m := range []analysis.IntervalMethod{analysis.Percentile, analysis.BCa} {
		cov, err := coverage(ctx, o, m)
		if err != nil {
			return res, err
		}
		if err := add(Check{Name: fmt.Sprintf("coverage of the 95%% %s interval (%d sims)", m, o.CoverageSims), Got: cov, SE: math.Sqrt(cov * (1 - cov) / float64(o.CoverageSims)), Want: "0.95 ± 0.015", Pass: math.Abs(cov-0.95) <= 0.015}); err != nil {
			return res, err
		}
	}
	if err := passCoverageChecks(ctx, w, o, add); err != nil {
		return res, err
	}
	const psi = 0.3
	alpha := analysis.HolmStepAlpha(0.05, 7, 1)
	dmin, _ := analysis.MinDetectable(o.PowerTasks, psi, alpha, 0.8)
	for _, delta := range []float64{dmin, dmin / 2} {
		pred := analysis.McNemarPower(o.PowerTasks, psi, delta, alpha)
		sim, err := simulatedPower(ctx, o, psi, delta, alpha)
		if err != nil {
			return res, err
		}
		name := fmt.Sprintf("power, %d tasks, discordance %.2f, lead %.3f: simulated", o.PowerTasks, psi, delta)
		if err := add(Check{Name: name, Got: sim, SE: math.Sqrt(sim * (1 - sim) / float64(o.PowerSims)), Want: fmt.Sprintf("%.4f ± 0.03", pred), Pass: math.Abs(sim-pred) <= 0.03}); err != nil {
			return res, err
		}
	}
	res.Pass = true
	for _, c := range res.Checks {
		res.Pass = res.Pass && c.Pass
	}
	verdict := "PASS"
	if !res.Pass {
		verdict = "FAIL"
	}
	_, err = fmt.Fprintln(w, verdict)
	return res, err
}

// nullRates analyses NullStudies studies of 8 arms drawn from one
// distribution through the full analysis.Analyse path, with a rule that accepts any
// challenger shown to improve on the incumbent.
func nullRates(ctx context.Context, o BenchOptions) (winner, best float64, err error) {
	const arms = 8
	d := analysis.Design{Hash: "null", Incumbent: "arm0", JobKinds: []analysis.JobKind{{Name: "job", Measure: analysis.MeasurePass}}, Seed: o.Seed}
	for a := range arms {
		name := fmt.Sprintf("arm%d", a)
		d.Arms = append(d.Arms, analysis.Arm{Name: name})
		if a > 0 {
			d.Pairs = append(d.Pairs, analysis.Pair{Candidate: name, Baseline: "arm0"})
			d.Rule.Clauses = append(d.Rule.Clauses, analysis.Clause{If: []analysis.Condition{{Outcomes: []analysis.Outcome{analysis.Improvement}, Candidate: name, Baseline: "arm0"}}, Then: "accept " + name})
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0xa11))
	difficulty := distuv.Beta{Alpha: 1, Beta: 1, Src: rng}
	trials := make([]analysis.Trial, 0, arms*o.NullTasks)
	wins, bests := 0, 0
	for s := range o.NullStudies {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		trials = trials[:0]
		for t := range o.NullTasks {
			p := difficulty.Rand()
			for a := range arms {
				trials = append(trials, analysis.Trial{DesignHash: "null", Arm: d.Arms[a].Name, JobKind: "job", Task: fmt.Sprintf("t%04d", t), Pass: rng.Float64() < p})
			}
		}
		d.Seed = o.Seed + uint64(s)
		r, err := analysis.Analyse(ctx, analysis.Input{Design: d, Trials: trials})
		if err != nil {
			return 0, 0, err
		}
		if r.Decision.Verdict == analysis.Accept {
			wins++
		}
		if r.Kinds[0].Verdict == "best" {
			bests++
		}
	}
	n := float64(o.NullStudies)
	return float64(wins) / n, float64(bests) / n, nil
}

// coverage draws task scores from Beta(2,5) (mean 2/7, skewed like real
// scores) and counts how often the interval covers the true mean.
func coverage(ctx context.Context, o BenchOptions, m analysis.IntervalMethod) (float64, error) {
	rng := rand.New(rand.NewPCG(o.Seed, 0xc0e))
	dist := distuv.Beta{Alpha: 2, Beta: 5, Src: rng}
	truth := 2.0 / 7
	xs := make([]float64, o.CoverageTasks)
	hit := 0
	for s := range o.CoverageSims {
		for i := range xs {
			xs[i] = dist.Rand()
		}
		iv, err := analysis.BootstrapInterval(ctx, xs, o.CoverageResamples, o.Seed+uint64(s), 7, m, 0.95)
		if err != nil {
			return 0, err
		}
		if float64(iv.Lo) <= truth && truth <= float64(iv.Hi) {
			hit++
		}
	}
	return float64(hit) / float64(o.CoverageSims), nil
}

// simulatedPower draws paired pass/fail tasks with discordance psi and a
// candidate lead delta and counts how often the exact McNemar test at alpha
// rejects in the candidate's favour.
func simulatedPower(ctx context.Context, o BenchOptions, psi, delta, alpha float64) (float64, error) {
	rng := rand.New(rand.NewPCG(o.Seed, 0x90e))
	p10 := (psi + delta) / 2
	hit := 0
	for range o.PowerSims {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		b, c := 0, 0
		for range o.PowerTasks {
			switch u := rng.Float64(); {
			case u < p10:
				b++
			case u < psi:
				c++
			}
		}
		if b > c && analysis.ExactMcNemar(b, c).P <= alpha {
			hit++
		}
	}
	return float64(hit) / float64(o.PowerSims), nil
}

// passCoverageChecks runs the pass-rate coverage grid, prints it, and adds
// a mean and a lowest-cell check per target and repeat count.
func passCoverageChecks(ctx context.Context, w io.Writer, o BenchOptions, add func(Check) error) error {
	co := o.PassCoverage
	co.Seed = o.Seed
	cells, err := PassCoverage(ctx, co)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "coverage (%%) of the 95%% pass-rate intervals, %d simulated studies a cell, each drawing its rate from ± min(2.5 points, half the distance to 0 or 1):\n", cells[0].Sims); err != nil {
		return err
	}
	if err := WriteCoverage(w, cells); err != nil {
		return err
	}
	for _, s := range SummariseCoverage(cells) {
		n := 0
		for _, c := range cells {
			if c.Target == s.Target && c.Repeats == s.Repeats {
				n++
			}
		}
		se := math.Sqrt(0.95 * 0.05 / float64(s.Worst.Sims*n))
		if err := add(Check{Name: fmt.Sprintf("coverage, %s, %d repeat(s): mean over %d cells", s.Target, s.Repeats, n), Got: s.Mean, SE: se, Want: "0.95 ± 0.015", Pass: math.Abs(s.Mean-0.95) <= 0.015}); err != nil {
			return err
		}
		bar := 0.935 - 2*s.Worst.SE
		name := fmt.Sprintf("coverage, %s, %d repeat(s): lowest (rate %.2f, %d tasks, σ %.0f)", s.Target, s.Repeats, s.Worst.Rate, s.Worst.Tasks, s.Worst.Spread)
		if err := add(Check{Name: name, Got: s.Worst.Covered, SE: s.Worst.SE, Want: fmt.Sprintf("≥ %.4f", bar), Pass: s.Worst.Covered >= bar}); err != nil {
			return err
		}
	}
	return nil
}
