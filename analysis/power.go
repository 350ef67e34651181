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
	// Counts of discordant tasks more than 12 standard deviations from n·psi
	// carry less than 1e-30 of the probability; skipping them keeps this
	// O(√n) for large task counts.
	mean, sd := float64(n)*psi, math.Sqrt(float64(n)*psi*(1-psi))
	lo := max(1, int(math.Floor(mean-12*sd-1)))
	hi := min(n, int(math.Ceil(mean+12*sd+1)))
	power := 0.0
	for m := lo; m <= hi; m++ {
		w := binomPMF(m, n, psi)
		if w == 0 {
			continue
		}
		klo := rejectBelow(m, alpha)
		if klo < 0 {
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
		if hi-lo < 1e-5 {
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

// rejectBelow is the largest k with 2·P(Bin(m,½) ≤ k) ≤ alpha, the edge of
// the exact McNemar test's rejection region for m discordant tasks, or -1
// when no count rejects.
func rejectBelow(m int, alpha float64) int {
	lo, hi := -1, m/2 // invariant: lo rejects (or is -1), hi+1 does not
	if 2*binomCDF(hi, m, 0.5) <= alpha {
		return hi
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if math.Min(1, 2*binomCDF(mid, m, 0.5)) <= alpha {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// PlanPower is the sizing a design states before running: from a pilot's
// discordance, the smallest lead the planned tasks detect with the plan's
// power (0.8 when unset) at Holm's strictest step over a family of tests.
// Read the pilot's discordance from Analyse on the pilot's trials
// (PairResult.Discordance).
func PlanPower(p PowerPlan, alpha float64, family int) PowerReport {
	if p.Power == 0 {
		p.Power = 0.8
	}
	step := HolmStepAlpha(alpha, max(family, 1), 1)
	md, ok := MinDetectable(p.Tasks, p.PilotDiscordance, step, p.Power)
	if !ok {
		md = math.NaN()
	}
	return PowerReport{PilotDiscordance: p.PilotDiscordance, Tasks: p.Tasks, Power: p.Power, Alpha: step, MinDetectable: Num(md), SmallestDifference: p.SmallestDifference}
}
