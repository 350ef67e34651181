package analysis

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Blaker's (2000) exact interval for a binomial proportion is the set of
// rates p at which the observed count is acceptable: its tail probability,
// plus the largest tail on the other side that is no larger, exceeds α. It
// is exact (it holds the true rate with probability at least its level,
// whatever the rate) and lies inside Clopper–Pearson's interval, so it is
// the shorter of the two. Its acceptability is not monotone in p
// everywhere; each bound is the crossing found by bisection between
// Clopper–Pearson's bound and the estimate, and the coverage enumeration
// (coverage_floor_test.go) checks the result, not the theory.

// blakerBounds widens [lo, hi] to Blaker's exact interval at level for x
// passes of n. For a whole count of whole tasks that is Blaker's interval
// itself. An effective task count under repeats is rarely whole, and its
// count of passes neither; there the bounds are interpolated linearly
// between the whole counts and task counts around x and n, which is
// Blaker's at whole values and moves continuously between them. The exact
// interval is computed only where it can reach beyond [lo, hi]: where lo is
// not acceptable at any of those whole points, Blaker's lower bound lies
// above it.
func blakerBounds(x, n, level, lo, hi float64) (float64, float64) {
	if !(n >= 1) {
		return lo, hi
	}
	alpha := 1 - level
	var pts []wholeCount
	n0 := math.Floor(n)
	for _, m := range [...]struct{ m, w float64 }{{n0, 1 - (n - n0)}, {n0 + 1, n - n0}} {
		if m.w <= 0 {
			continue
		}
		xm := clampRange(x*m.m/n, 0, m.m)
		k0 := math.Floor(xm)
		for _, k := range [...]struct{ k, w float64 }{{k0, 1 - (xm - k0)}, {k0 + 1, xm - k0}} {
			if k.w > 0 {
				pts = append(pts, wholeCount{k: int(k.k), m: int(m.m), w: m.w * k.w})
			}
		}
	}
	buf := make([]float64, int(n0)+2)
	reachesLo, reachesHi := false, false
	for _, p := range pts {
		reachesLo = reachesLo || (p.k > 0 && blakerAcceptability(p.k, p.m, lo, buf) > alpha)
		reachesHi = reachesHi || (p.k < p.m && blakerAcceptability(p.k, p.m, hi, buf) > alpha)
	}
	var bLo, bHi float64
	for _, p := range pts {
		if reachesLo {
			bLo += p.w * blakerLower(p.k, p.m, alpha, buf)
		}
		if reachesHi {
			bHi += p.w * (1 - blakerLower(p.m-p.k, p.m, alpha, buf))
		}
	}
	if reachesLo {
		lo = math.Min(lo, bLo)
	}
	if reachesHi {
		hi = math.Max(hi, bHi)
	}
	return lo, hi
}

// wholeCount is k passes of m tasks, weighted in an interpolation.
type wholeCount struct {
	k, m int
	w    float64
}

// blakerLower is the lower bound of Blaker's interval at 1 − alpha for k
// passes of m; the upper bound is 1 minus the lower bound for the m − k
// failures. buf holds at least m + 1 values.
func blakerLower(k, m int, alpha float64, buf []float64) float64 {
	if k <= 0 {
		return 0
	}
	// Clopper–Pearson's lower bound is not acceptable (its one tail is
	// already α/2 and the other adds at most as much); the estimate is.
	from := distuv.Beta{Alpha: float64(k), Beta: float64(m - k + 1)}.Quantile(alpha / 2)
	to := float64(k) / float64(m)
	for to-from > 1e-10 {
		mid := (from + to) / 2
		if blakerAcceptability(k, m, mid, buf) > alpha {
			to = mid
		} else {
			from = mid
		}
	}
	return (from + to) / 2
}

// blakerAcceptability is Blaker's acceptability of k passes of m at rate p:
// the smaller tail at k plus the largest opposite tail no larger than it
// (with a relative tolerance of 1e-7 for ties), at most 1. buf holds at
// least m + 1 values.
func blakerAcceptability(k, m int, p float64, buf []float64) float64 {
	pmf := binomPMFs(m, p, buf[:m+1])
	var below, above float64
	for j, v := range pmf {
		if j <= k {
			below += v
		}
		if j >= k {
			above += v
		}
	}
	tail, opp := below, 0.0
	if above < below {
		tail = above
		for j := 0; j < k && opp+pmf[j] <= tail*(1+1e-7); j++ {
			opp += pmf[j]
		}
	} else {
		for j := m; j > k && opp+pmf[j] <= tail*(1+1e-7); j-- {
			opp += pmf[j]
		}
	}
	return math.Min(1, tail+opp)
}

// binomPMFs is P(X = j) for j = 0..m, X ~ Binomial(m, p): the mode in log
// space, the rest by the ratio of neighbours, stopped where the terms no
// longer add to a double's worth of the mode. It fills pmf, of length m + 1,
// or a new slice if pmf is nil.
func binomPMFs(m int, p float64, pmf []float64) []float64 {
	if pmf == nil {
		pmf = make([]float64, m+1)
	}
	clear(pmf)
	switch {
	case p <= 0:
		pmf[0] = 1
		return pmf
	case p >= 1:
		pmf[m] = 1
		return pmf
	}
	mode := min(m, int(float64(m+1)*p))
	pmf[mode] = binomPMF(mode, m, p)
	odds := p / (1 - p)
	for j := mode; j < m; j++ {
		pmf[j+1] = pmf[j] * float64(m-j) / float64(j+1) * odds
		if pmf[j+1] < 1e-18*pmf[mode] {
			break
		}
	}
	for j := mode; j > 0; j-- {
		pmf[j-1] = pmf[j] * float64(j) / float64(m-j+1) / odds
		if pmf[j-1] < 1e-18*pmf[mode] {
			break
		}
	}
	return pmf
}
