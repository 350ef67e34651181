package fidelity

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"

	"rig/analysis"
)

// quantile is the f-quantile of sorted values by linear interpolation
// between order statistics at f·(n-1): the definition llama-perplexity
// prints its KL percentiles with, so rig's 99th percentile is the same
// statistic, not a neighbouring one.
func quantile(sorted []float64, f float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case f <= 0:
		return sorted[0]
	case f >= 1:
		return sorted[n-1]
	}
	p := f * float64(n-1)
	i := int(p)
	p -= float64(i)
	return (1-p)*sorted[i] + p*sorted[min(i+1, n-1)]
}

// unitsInterval is a percentile bootstrap interval of stat over n units
// drawn with replacement: the cluster bootstrap for statistics that pool
// the tokens of the drawn units (a percentile), which
// analysis.BootstrapInterval cannot give since it resamples means of one
// value per unit. stat gets the drawn unit indices and may reorder nothing
// it does not own.
func unitsInterval(ctx context.Context, n int, stat func(idx []int) float64, resamples int, seed, stream uint64, level float64) (analysis.Interval, error) {
	iv := analysis.Interval{Level: level, Method: analysis.Percentile, Lo: analysis.Num(math.NaN()), Hi: analysis.Num(math.NaN()),
		Note: "units resampled with replacement, their tokens pooled"}
	if n == 0 || resamples < 1 {
		return iv, nil
	}
	rng := rand.New(rand.NewPCG(seed, stream))
	idx := make([]int, n)
	boot := make([]float64, 0, resamples)
	for b := range resamples {
		if b%256 == 0 && ctx.Err() != nil {
			return iv, ctx.Err()
		}
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		boot = append(boot, stat(idx))
	}
	slices.Sort(boot)
	alpha := (1 - level) / 2
	iv.Lo, iv.Hi = analysis.Num(quantile(boot, alpha)), analysis.Num(quantile(boot, 1-alpha))
	return iv, nil
}
