package analysis

import (
	"math"
)

// binomPMF is P(X = k) for X ~ Binomial(n, p), computed in log space.
func binomPMF(k, n int, p float64) float64 {
	if k < 0 || k > n {
		return 0
	}
	switch p {
	case 0:
		return b2f(k == 0)
	case 1:
		return b2f(k == n)
	}
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
}

// BinomialTest is the exact two-sided binomial test of k successes in n
// trials against success probability p: the total probability of outcomes no
// more likely than the observed one (the "minlike" rule, with a relative
// tolerance of 1e-7 for ties in likelihood, as in common reference
// implementations).
func BinomialTest(k, n int, p float64) float64 {
	if n == 0 {
		return 1
	}
	d := binomPMF(k, n, p) * (1 + 1e-7)
	s := 0.0
	for i := 0; i <= n; i++ {
		if q := binomPMF(i, n, p); q <= d {
			s += q
		}
	}
	return math.Min(1, s)
}

// McNemar is the exact McNemar test on a pair's discordant tasks.
type McNemar struct {
	// CandidateOnly counts tasks the candidate passes and the baseline fails
	// (newly fixed); BaselineOnly the reverse (newly failing).
	CandidateOnly int     `json:"candidate_only"`
	BaselineOnly  int     `json:"baseline_only"`
	P             float64 `json:"p"`
	// MidP is reported for reference only; decisions use P.
	MidP float64 `json:"mid_p"`
}

// ExactMcNemar is the exact two-sided binomial test of b against b+c
// discordant pairs at one half. The mid-p variant is computed alongside but
// is not what the analysis decides on.
func ExactMcNemar(b, c int) McNemar {
	n := b + c
	m := McNemar{CandidateOnly: b, BaselineOnly: c, P: 1, MidP: 1}
	if n == 0 {
		return m
	}
	lo := min(b, c)
	tail := 0.0
	for i := 0; i <= lo; i++ {
		tail += binomPMF(i, n, 0.5)
	}
	m.P = math.Min(1, 2*tail)
	m.MidP = math.Min(1, 2*(tail-0.5*binomPMF(lo, n, 0.5)))
	return m
}

// Holm returns Holm step-down adjusted p-values in the input order.
func Holm(ps []float64) []float64 {
	m := len(ps)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	// Stable insertion sort keeps equal p-values in input order.
	for i := 1; i < m; i++ {
		for j := i; j > 0 && ps[order[j]] < ps[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	adj := make([]float64, m)
	run := 0.0
	for step, i := range order {
		v := math.Min(1, float64(m-step)*ps[i])
		run = math.Max(run, v)
		adj[i] = run
	}
	return adj
}

// HolmStepAlpha is the level the step-th smallest of m p-values (1-based)
// faces in Holm's procedure; step 1 is the strictest, alpha/m.
func HolmStepAlpha(alpha float64, m, step int) float64 {
	return alpha / float64(m-step+1)
}
