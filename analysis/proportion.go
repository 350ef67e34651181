package analysis

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// The intervals of a pass job kind are score intervals for proportions, not
// bootstrap intervals: a bootstrap of 0 of 30 resamples nothing but zeros and
// returns [0, 0], a certainty the data cannot give, and its coverage falls
// far below nominal near 0% and 100%. With one repeat a task is a Bernoulli
// trial. An arm's rate takes Wilson's score interval, joined with Blaker's
// exact interval at the floor level (floorLevel): Wilson's coverage averages
// the nominal level but dips to 84% just under the lower bound of one pass
// (and to 92.6% inside the range at 20 tasks), and the exact interval lifts
// every dip to the floor while leaving Wilson's bounds wherever they are
// already wider. A paired difference takes Tango's score interval, widened
// on the edges of the 2×2 table, where one cell is nearly empty and the
// difference behaves like a single proportion near 0 or 1 (deltaBounds).
// With several repeats a task's value is the share of its repeats that
// passed and repeats of one task are correlated; the same intervals are used
// at the effective number of tasks the design effect gives (Kish), which lies
// between the tasks and the trials.

// zFor is the two-sided normal quantile for a central interval at level.
func zFor(level float64) float64 {
	return distuv.UnitNormal.Quantile(1 - (1-level)/2)
}

// floorLevel is the coverage the pass-rate intervals keep at every true
// value, not only on average: 93.5% for a 95% interval, 1 − 1.3α in general
// (issue 46's bar). docs/statistics.md has the enumeration that checks it.
func floorLevel(level float64) float64 {
	return 1 - 1.3*(1-level)
}

// rateBounds is the arm-rate interval for x passes of n (neither need be
// whole): Wilson's score interval at level, widened to Blaker's exact
// interval at floorLevel(level) wherever that reaches further. Every true
// rate lies in the exact interval with probability at least the floor, so it
// lies in the union at least as often; the union is Wilson's interval except
// near Wilson's coverage dips.
func rateBounds(x, n, level float64) (lo, hi float64) {
	lo, hi = wilsonBounds(x/n, n, zFor(level))
	return blakerBounds(x, n, floorLevel(level), lo, hi)
}

// wilsonBounds is Wilson's score interval for a proportion p observed over n
// (n need not be whole: an effective sample size is allowed).
func wilsonBounds(p, n, z float64) (lo, hi float64) {
	switch {
	case p <= 0:
		return 0, z * z / (n + z*z)
	case p >= 1:
		return n / (n + z*z), 1
	}
	z2 := z * z
	den := 1 + z2/n
	centre := (p + z2/(2*n)) / den
	half := z / den * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return clampRange(centre-half, 0, 1), clampRange(centre+half, 0, 1)
}

// tangoBounds is Tango's (1998) score interval for the difference of two
// paired proportions: b pairs favour the first, c the second, of n pairs
// (counts need not be whole). The score statistic at a difference delta
// uses the constrained maximum-likelihood estimate of the second discordant
// cell; the bounds are where the statistic crosses ±z, found by bisection
// (the statistic decreases in delta).
func tangoBounds(b, c, n, z float64) (lo, hi float64) {
	score := func(delta float64) float64 {
		num := b - c - n*delta
		w := delta*(2*n-b+c) - (b + c)
		q := (-w + math.Sqrt(w*w+8*n*c*delta*(1-delta))) / (4 * n)
		v := n * (2*q + delta - delta*delta)
		// At ±1 the constraint leaves one point and the quadratic's root is
		// not it; the variance there is zero.
		if v <= 0 || math.Abs(delta) >= 1 {
			switch {
			case num > 0:
				return math.Inf(1)
			case num < 0:
				return math.Inf(-1)
			}
			return 0
		}
		return num / math.Sqrt(v)
	}
	est := (b - c) / n
	cross := func(from, to, target float64) float64 {
		// score(from) is on the near side of target; find where it crosses.
		if (target > 0 && score(to) <= target) || (target < 0 && score(to) >= target) {
			return to
		}
		for range 52 { // to within 2^-52 of the crossing
			mid := (from + to) / 2
			if (target > 0 && score(mid) > target) || (target < 0 && score(mid) < target) {
				to = mid
			} else {
				from = mid
			}
		}
		return (from + to) / 2
	}
	return cross(est, -1, z), cross(est, 1, -z)
}

// edgeCount is the largest cell count (of tasks) on which deltaBounds
// widens Tango's bound with a Poisson bound. Score intervals dip under the
// floor just past each small count (Wilson's to 84% past one pass and 89%
// past two; Brown, Cai and DasGupta, 2001). Mending counts of one and two
// is what the enumeration needs for the floor at 20 to 200 tasks; mending
// up to five also holds it but over-covers more where discordant tasks are
// few (docs/statistics.md).
const edgeCount = 2

// deltaBounds is the interval for the paired difference: b tasks passed by
// the first arm alone and c by the second alone, of n (none need be whole).
// It is Tango's score interval at level, widened where the table has a
// nearly empty cell, because there the difference behaves like a single
// proportion near 0 or 1 and Tango's coverage dips as Wilson's does:
//   - b of 1 or 2 (edgeCount): the lower bound is at most Tango's for no
//     such task plus λ/n, λ the one-sided Poisson lower bound for b at α
//     (Brown, Cai and DasGupta's modification of Wilson's interval, carried
//     to the difference); c likewise for the upper bound;
//   - the concordant cell m that small as well as b: the lower bound is at
//     most −1 + (λ(m) + 2λ(b))/n, the difference at its smallest when every
//     task is discordant; likewise for the upper bound with c;
//   - a cell empty: with b = 0 the difference is minus c's share once the
//     first arm never wins alone, with c = 0 it is b's share, and with no
//     concordant task it is 2·(b's share) − 1; the interval holds the arm
//     rate interval (rateBounds) of that share.
//
// Each widening only adds differences, so coverage never falls; the
// enumeration in coverage_floor_test.go checks that it reaches the floor.
func deltaBounds(b, c, n, level float64) (lo, hi float64) {
	z := zFor(level)
	lo, hi = tangoBounds(b, c, n, z)
	m := math.Max(0, n-b-c)
	poisson := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		return distuv.Gamma{Alpha: x, Beta: 1}.Quantile(1 - level)
	}
	if b > 0 && b <= edgeCount {
		l, _ := tangoBounds(0, c, n, z)
		lo = math.Min(lo, l+poisson(b)/n)
	}
	if c > 0 && c <= edgeCount {
		_, h := tangoBounds(b, 0, n, z)
		hi = math.Max(hi, h-poisson(c)/n)
	}
	if m <= edgeCount && b <= edgeCount {
		lo = math.Min(lo, -1+(poisson(m)+2*poisson(b))/n)
	}
	if m <= edgeCount && c <= edgeCount {
		hi = math.Max(hi, 1-(poisson(m)+2*poisson(c))/n)
	}
	if b == 0 {
		l, h := rateBounds(c, n, level)
		lo, hi = math.Min(lo, -h), math.Max(hi, -l)
	}
	if c == 0 {
		l, h := rateBounds(b, n, level)
		lo, hi = math.Min(lo, l), math.Max(hi, h)
	}
	if m == 0 {
		l, h := rateBounds(b, n, level)
		lo, hi = math.Min(lo, 2*l-1), math.Max(hi, 2*h-1)
	}
	return lo, hi
}

// noSpreadBounds is the interval for a sample of n values in [lo, hi] that
// are all equal to v. No interval built from the spread exists, so the bound
// is exact and distribution-free: if the mean were above u, each value would
// sit at or below v with probability at most (hi-u)/(hi-v) (Markov's
// inequality), and all n of them with that to the n-th; u is where that
// reaches (1-level)/2. At v = 0 on [0,1] this is the Clopper–Pearson bound
// for 0 of n, 1 − (α/2)^(1/n).
func noSpreadBounds(v, lo, hi float64, n int, level float64) (float64, float64) {
	r := 1 - math.Pow((1-level)/2, 1/float64(n))
	return v - (v-lo)*r, v + (hi-v)*r
}

// RateInterval is the interval of a pass job kind's arm mean: ys are the
// per-task shares of repeats passed and trials the scored trials behind them.
// Analyse gives it to each arm; it is exported so that `rig bench stats`
// (bench/stats) can measure its coverage.
func RateInterval(ys []float64, trials int, level float64) Interval {
	iv := Interval{Level: level, Method: WilsonBlaker, Lo: Num(math.NaN()), Hi: Num(math.NaN())}
	n := len(ys)
	if n == 0 {
		return iv
	}
	m := mean(ys)
	if trials <= n {
		lo, hi := rateBounds(m*float64(n), float64(n), level)
		iv.Lo, iv.Hi = Num(lo), Num(hi)
		return iv
	}
	s2 := popVariance(ys, m)
	if s2 == 0 && (m == 0 || m == 1) {
		lo, hi := noSpreadBounds(m, 0, 1, n, level)
		iv.Lo, iv.Hi, iv.Method = Num(lo), Num(hi), NoSpread
		iv.Note = fmt.Sprintf("every one of the %d tasks scored %g in all its repeats: the design effect of repeats cannot be estimated, so the bound is exact over tasks", n, m)
		return iv
	}
	neff := effectiveTasks(m*(1-m), s2, n, trials)
	lo, hi := rateBounds(m*neff, neff, level)
	iv.Lo, iv.Hi, iv.Method, iv.EffectiveN = Num(lo), Num(hi), WilsonBlakerDesignEffect, neff
	return iv
}

// DeltaInterval is the interval of a pass job kind's paired difference:
// cs and bs are the candidate's and baseline's per-task shares over the
// paired tasks, trials the fewer scored trials of the two arms on them.
// Analyse gives it to each pair; it is exported so that `rig bench stats`
// (bench/stats) can measure its coverage.
func DeltaInterval(cs, bs []float64, trials int, level float64) Interval {
	iv := Interval{Level: level, Method: TangoEdges, Lo: Num(math.NaN()), Hi: Num(math.NaN())}
	n := len(cs)
	if n == 0 {
		return iv
	}
	// With one repeat these are the discordant shares b/n and c/n; with
	// several, the chance that a repeat of each arm disagrees, averaged over
	// tasks. Their difference is the mean difference either way.
	var bHat, cHat float64
	ds := make([]float64, n)
	for i := range cs {
		bHat += cs[i] * (1 - bs[i])
		cHat += (1 - cs[i]) * bs[i]
		ds[i] = cs[i] - bs[i]
	}
	bHat, cHat = bHat/float64(n), cHat/float64(n)
	neff := float64(n)
	if trials > n {
		d := mean(ds)
		iv.Method = TangoEdgesDesignEffect
		neff = effectiveTasks(bHat+cHat-d*d, popVariance(ds, d), n, trials)
		iv.EffectiveN = neff
	}
	lo, hi := deltaBounds(bHat*neff, cHat*neff, neff, level)
	iv.Lo, iv.Hi = Num(lo), Num(hi)
	return iv
}

// effectiveTasks is Kish's effective sample size: the variance one trial
// would have (unit) over the variance of a task's value (between), times
// the tasks, held between the tasks (repeats of a task perfectly alike)
// and the trials (repeats independent). No spread between tasks while a
// trial does vary means the repeats carried the information: the trials.
// Neither varying (every repeat of both arms alike: all failed, say) says
// nothing about how alike repeats are, so the tasks are the count.
func effectiveTasks(unit, between float64, n, trials int) float64 {
	switch {
	case between <= 0 && unit <= 0:
		return float64(n)
	case between <= 0:
		return float64(trials)
	}
	return clampRange(float64(n)*unit/between, float64(n), float64(trials))
}

func popVariance(xs []float64, m float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return s / float64(len(xs))
}

func clampRange(x, lo, hi float64) float64 {
	return math.Min(hi, math.Max(lo, x))
}

// noSpreadIn reports whether xs has no spread.
func noSpreadIn(xs []float64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}
