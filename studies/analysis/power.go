package analysis

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// binomCDF is P(X ≤ k) for X ~ Binomial(n, p).
func binomCDF(k, n int, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n:
		return 1
	case p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	return mathext.RegIncBeta(float64(n-k), float64(k+1), 1-p)
}

// McNemarPower is the probability that the exact two-sided McNemar test at
// level alpha rejects in the candidate's favour, over n tasks of which a share
// psi is discordant and the candidate leads by delta (the share of tasks only
// it passes minus the share only the baseline passes). It is exact: it sums
// over every count of discordant tasks m and, given m, over the binomial
// count of candidate-favouring tasks in the rejection region.
func McNemarPower(n int, psi, delta, alpha float64) float64 {
	if n <= 0 || psi <= 0 || psi > 1 || delta < 0 || delta > psi {
		return 0
	}
	q := (psi + delta) / (2 * psi) // P(a discordant task favours the candidate)
	power := 0.0
	klo := -1 // largest k with 2·P(Bin(m,½) ≤ k) ≤ alpha; never decreases in m
	for m := 1; m <= n; m++ {
		for klo+1 < m && math.Min(1, 2*binomCDF(klo+1, m, 0.5)) <= alpha {
			klo++
		}
		if klo < 0 {
			continue
		}
		w := binomPMF(m, n, psi)
		if w == 0 {
			continue
		}
		// Reject for the candidate when the baseline-favouring count c ≤ klo.
		power += w * binomCDF(klo, m, 1-q)
	}
	return math.Min(1, power)
}

// MinDetectable is the smallest lead delta (in [0, psi]) that n tasks detect
// with at least the given power using the exact McNemar test at level alpha
// (pass the Holm step's alpha, e.g. HolmStepAlpha(0.05, m, 1)). ok is false
// when even delta = psi is not detectable: the study cannot see any lead.
func MinDetectable(n int, psi, alpha, power float64) (delta float64, ok bool) {
	if McNemarPower(n, psi, psi, alpha) < power {
		return math.NaN(), false
	}
	lo, hi := 0.0, psi
	for range 50 {
		mid := (lo + hi) / 2
		if McNemarPower(n, psi, mid, alpha) >= power {
			hi = mid
		} else {
			lo = mid
		}
		if hi-lo < 1e-6 {
			break
		}
	}
	return hi, true
}

// MaxTasks bounds TasksNeeded's search.
const MaxTasks = 1 << 20

// TasksNeeded is the smallest task count (by bisection; exact power is a
// slightly saw-toothed function of n, so a count a few above may dip just
// under) that detects a lead delta with the given power at level alpha.
// ok is false when MaxTasks tasks do not suffice.
func TasksNeeded(delta, psi, alpha, power float64) (n int, ok bool) {
	if delta <= 0 || delta > psi {
		return 0, false
	}
	hi := 8
	for McNemarPower(hi, psi, delta, alpha) < power {
		if hi >= MaxTasks {
			return 0, false
		}
		hi *= 2
	}
	lo := hi / 2
	if hi == 8 {
		lo = 0
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if McNemarPower(mid, psi, delta, alpha) >= power {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}
