package speed

import (
	"gonum.org/v1/gonum/stat"
	"math"
	"slices"
)

// Stat is a mean and its sample standard deviation over the repetitions,
// as llama-bench prints them ("mean ± sd").
type Stat struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	N    int     `json:"n"`
}

func statOf(xs []float64) Stat {
	s := Stat{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	for _, x := range xs {
		s.Mean += x
	}
	s.Mean /= float64(len(xs))
	if len(xs) > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(xs)-1))
	}
	return s
}

// Percentiles are the median and the 99th percentile by nearest rank (of
// few values, the largest).
type Percentiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func percentilesOf(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	// Nearest rank is gonum's Empirical quantile.
	return Percentiles{P50: stat.Quantile(0.5, stat.Empirical, s, nil), P99: stat.Quantile(0.99, stat.Empirical, s, nil)}
}
