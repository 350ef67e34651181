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
// trial and Wilson's interval (arm rates) and Tango's (paired differences)
// apply as published. With several repeats a task's value is the share of
// its repeats that passed and repeats of one task are correlated; the same
// intervals are used at the effective number of tasks the design effect
// gives (Kish), which lies between the tasks and the trials.

// zFor is the two-sided normal quantile for a central interval at level.
func zFor(level float64) float64 {
	return distuv.UnitNormal.Quantile(1 - (1-level)/2)
}

// wilsonBounds is Wilson's score interval for a proportion p observed over n
// (n need not be whole: an effective sample size is allowed).
func wilsonBounds(p, n, z float64) (lo, hi float64) {
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
	iv := Interval{Level: level, Method: Wilson, Lo: Num(math.NaN()), Hi: Num(math.NaN())}
	n := len(ys)
	if n == 0 {
		return iv
	}
	m := mean(ys)
	if trials <= n {
		lo, hi := wilsonBounds(m, float64(n), zFor(level))
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
	lo, hi := wilsonBounds(m, neff, zFor(level))
	iv.Lo, iv.Hi, iv.Method, iv.EffectiveN = Num(lo), Num(hi), WilsonDesignEffect, neff
	return iv
}

// DeltaInterval is the interval of a pass job kind's paired difference:
// cs and bs are the candidate's and baseline's per-task shares over the
// paired tasks, trials the fewer scored trials of the two arms on them.
// Analyse gives it to each pair; it is exported so that `rig bench stats`
// (bench/stats) can measure its coverage.
func DeltaInterval(cs, bs []float64, trials int, level float64) Interval {
	iv := Interval{Level: level, Method: Tango, Lo: Num(math.NaN()), Hi: Num(math.NaN())}
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
		iv.Method = TangoDesignEffect
		neff = effectiveTasks(bHat+cHat-d*d, popVariance(ds, d), n, trials)
		iv.EffectiveN = neff
	}
	lo, hi := tangoBounds(bHat*neff, cHat*neff, neff, zFor(level))
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
