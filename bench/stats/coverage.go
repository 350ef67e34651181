package stats

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat/distuv"

	"rig/analysis"
)

// CoverageOptions sizes the pass-rate coverage grid. Zero values take the
// defaults noted on each field.
type CoverageOptions struct {
	Seed uint64
	// Sims is the number of simulated studies per cell (2000).
	Sims int
	// Rates are the true pass rates (2% to 98%); Tasks the task counts
	// (20, 50, 100, 200); Repeats the repeats per task (1 and 3).
	Rates   []float64
	Tasks   []int
	Repeats []int
	// Spreads are the task heterogeneities σ of the probit model (0 and 1):
	// 0 makes every task alike and the arms independent, 1 gives tasks of
	// varied difficulty that both arms share.
	Spreads []float64
}

func (o CoverageOptions) withDefaults() CoverageOptions {
	if o.Sims == 0 {
		o.Sims = 2000
	}
	if o.Rates == nil {
		o.Rates = []float64{0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.98}
	}
	if o.Tasks == nil {
		o.Tasks = []int{20, 50, 100, 200}
	}
	if o.Repeats == nil {
		o.Repeats = []int{1, 3}
	}
	if o.Spreads == nil {
		o.Spreads = []float64{0, 1}
	}
	return o
}

// CoverageCell is the coverage of the 95% interval in one cell of the grid.
type CoverageCell struct {
	// Target is "arm rate" or "paired delta".
	Target string `json:"target"`
	// Rate is the true pass rate (the baseline's, for a delta); Delta the
	// candidate's lead over it (0 for an arm rate).
	Rate    float64 `json:"rate"`
	Delta   float64 `json:"delta"`
	Tasks   int     `json:"tasks"`
	Repeats int     `json:"repeats"`
	Spread  float64 `json:"spread"`
	Sims    int     `json:"sims"`
	// Covered is the share of simulated studies whose interval held the
	// study's true value; SE its Monte Carlo standard error.
	Covered float64 `json:"covered"`
	SE      float64 `json:"se"`
}

// coverageLevel is the nominal level the grid measures.
const coverageLevel = 0.95

// rateJitter is the half-width of the neighbourhood each simulated study draws
// its true rate from. Coverage of any interval for a proportion swings with
// the rate on a scale of 1/tasks, because the count is discrete: no interval
// holds 95% at every single rate (at 2% of 20 tasks the count is 0 two
// times in three). The convention, as in Brown, Cai and DasGupta (2001) and
// Newcombe (1998), is to average over a small neighbourhood of each rate.
func rateJitter(p float64) float64 {
	return math.Min(0.025, math.Min(p, 1-p)/2)
}

// PassCoverage simulates pass/fail studies under a probit model (a trial
// passes when μ + σ·z_task + ε > 0, the task's z shared by both arms, ε
// fresh per trial) and measures how often the analysis's 95% interval
// covers the true value: the arm's pass rate (Wilson's interval joined with
// Blaker's exact one at the 93.5% floor, at the effective task count with
// repeats) and the paired difference (Tango's, widened on the table's
// edges, likewise), for an equal pair and for a pair 10
// points apart. Each cell draws its true rate from a small neighbourhood of
// its nominal one (jitter). The cells run in parallel; each has its own
// seeded stream, so the result does not depend on the number of cores.
func PassCoverage(ctx context.Context, opts CoverageOptions) ([]CoverageCell, error) {
	o := opts.withDefaults()
	var cells []CoverageCell
	for _, target := range []string{"arm rate", "paired delta"} {
		deltas := []float64{0}
		if target == "paired delta" {
			deltas = []float64{0, 0.1}
		}
		for _, delta := range deltas {
			for _, r := range o.Repeats {
				for _, s := range o.Spreads {
					for _, n := range o.Tasks {
						for _, p := range o.Rates {
							cells = append(cells, CoverageCell{Target: target, Rate: p, Delta: delta, Tasks: n, Repeats: r, Spread: s, Sims: o.Sims})
						}
					}
				}
			}
		}
	}
	next := make(chan int, len(cells))
	for i := range cells {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(cells)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					return
				}
				cells[i].run(o.Seed, uint64(i))
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return cells, nil
}

// run simulates one cell with the analysis's intervals.
func (c *CoverageCell) run(seed, stream uint64) {
	c.runWith(seed, stream, analysis.RateInterval, analysis.DeltaInterval)
}

// runWith simulates one cell with the given interval makers, so a test can
// measure a published alternative on the very studies the analysis's
// intervals see.
func (c *CoverageCell) runWith(seed, stream uint64, arm func(ys []float64, trials int, level float64) analysis.Interval, delta func(cs, bs []float64, trials int, level float64) analysis.Interval) {
	rng := rand.New(rand.NewPCG(seed, 0xc0fe+stream))
	scale := math.Sqrt(1 + c.Spread*c.Spread)
	n, r := c.Tasks, c.Repeats
	ys, bs := make([]float64, n), make([]float64, n)
	hit := 0
	for range c.Sims {
		// The delta moves toward the middle, so both rates stay in (0,1).
		p := c.Rate + (2*rng.Float64()-1)*rateJitter(c.Rate)
		q := p + c.Delta
		if p > 0.5 {
			q = p - c.Delta
		}
		mu := distuv.UnitNormal.Quantile(p) * scale
		muB := distuv.UnitNormal.Quantile(q) * scale
		paired := c.Target == "paired delta"
		for i := range n {
			// With no spread every task has the arm's rate.
			pa, pb := p, q
			if c.Spread > 0 {
				z := c.Spread * rng.NormFloat64()
				pa = distuv.UnitNormal.CDF(mu + z)
				if paired {
					pb = distuv.UnitNormal.CDF(muB + z)
				}
			}
			ys[i] = passShare(rng, pa, r)
			if paired {
				bs[i] = passShare(rng, pb, r)
			}
		}
		var iv analysis.Interval
		truth := p
		if paired {
			iv = delta(ys, bs, n*r, coverageLevel)
			truth = p - q
		} else {
			iv = arm(ys, n*r, coverageLevel)
		}
		if float64(iv.Lo) <= truth && truth <= float64(iv.Hi) {
			hit++
		}
	}
	c.Covered = float64(hit) / float64(c.Sims)
	c.SE = math.Sqrt(c.Covered * (1 - c.Covered) / float64(c.Sims))
}

// passShare is the fraction of r trials at pass probability p that passed.
func passShare(rng *rand.Rand, p float64, r int) float64 {
	k := 0
	for range r {
		if rng.Float64() < p {
			k++
		}
	}
	return float64(k) / float64(r)
}

// CoverageSummary is the mean and the worst cell of one target and repeat
// count.
type CoverageSummary struct {
	Target  string       `json:"target"`
	Repeats int          `json:"repeats"`
	Mean    float64      `json:"mean"`
	Worst   CoverageCell `json:"worst"`
	// Furthest is the cell furthest from nominal, either way.
	Furthest CoverageCell `json:"furthest"`
}

// SummariseCoverage groups cells by target and repeats.
func SummariseCoverage(cells []CoverageCell) []CoverageSummary {
	var out []CoverageSummary
	idx := map[[2]any]int{}
	counts := map[int]int{}
	for _, c := range cells {
		k := [2]any{c.Target, c.Repeats}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, CoverageSummary{Target: c.Target, Repeats: c.Repeats, Worst: c, Furthest: c})
		}
		s := &out[i]
		s.Mean += c.Covered
		counts[i]++
		if c.Covered < s.Worst.Covered {
			s.Worst = c
		}
		if math.Abs(c.Covered-coverageLevel) > math.Abs(s.Furthest.Covered-coverageLevel) {
			s.Furthest = c
		}
	}
	for i := range out {
		out[i].Mean /= float64(counts[i])
	}
	return out
}

// WriteCoverage prints the grid as a table: one row per target, repeats,
// spread and task count; one column per rate.
func WriteCoverage(w io.Writer, cells []CoverageCell) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', tabwriter.AlignRight)
	var rates []float64
	seen := map[float64]bool{}
	for _, c := range cells {
		if !seen[c.Rate] {
			seen[c.Rate] = true
			rates = append(rates, c.Rate)
		}
	}
	fmt.Fprint(tw, "target\tΔ\trepeats\tσ\ttasks\t")
	for _, p := range rates {
		fmt.Fprintf(tw, "%.0f%%\t", 100*p)
	}
	fmt.Fprintln(tw)
	for i := 0; i < len(cells); {
		c := cells[i]
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%.0f\t%d\t", c.Target, c.Delta, c.Repeats, c.Spread, c.Tasks)
		for ; i < len(cells) && cells[i].Target == c.Target && cells[i].Delta == c.Delta && cells[i].Repeats == c.Repeats && cells[i].Spread == c.Spread && cells[i].Tasks == c.Tasks; i++ {
			fmt.Fprintf(tw, "%.1f\t", 100*cells[i].Covered)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
