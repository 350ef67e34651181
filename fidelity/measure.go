package fidelity

import (
	"context"
	"fmt"
	"math"
	"slices"

	"rig/analysis"
)

// Units is one arm's scored tokens grouped by bootstrap unit: Tokens[i]
// are the tokens of unit Names[i] (a task, or a chunk of a text).
type Units struct {
	Arm    string
	Names  []string
	Tokens [][]Token
}

// Group gathers a run's tokens by their segments' units, in the order each
// unit first appears.
func Group(arm string, segs []Segment, tokens [][]Token) (Units, error) {
	if len(segs) != len(tokens) {
		return Units{}, fmt.Errorf("%d segments and %d answers", len(segs), len(tokens))
	}
	u := Units{Arm: arm}
	at := map[string]int{}
	for i, s := range segs {
		j, ok := at[s.Unit]
		if !ok {
			j = len(u.Names)
			at[s.Unit] = j
			u.Names = append(u.Names, s.Unit)
			u.Tokens = append(u.Tokens, nil)
		}
		u.Tokens[j] = append(u.Tokens[j], tokens[i]...)
	}
	return u, nil
}

// Estimate is a figure with its interval.
type Estimate struct {
	Value    float64           `json:"value"`
	Interval analysis.Interval `json:"interval"`
}

// Figures is one arm's fidelity to the reference.
type Figures struct {
	Arm    string `json:"arm"`
	Units  int    `json:"units"`
	Tokens int    `json:"tokens"`
	// MeanKL is the mean over units of each unit's mean KL per token, in
	// nats; with units of equal length (a text's chunks) it is the mean
	// over tokens that llama-perplexity prints.
	MeanKL Estimate `json:"mean_kl"`
	// P99KL is the 99th percentile of KL over every scored token.
	P99KL Estimate `json:"p99_kl"`
	// TopAgreement is the mean over units of the share of tokens whose top
	// token is the reference's.
	TopAgreement Estimate `json:"top_agreement"`
	// TokenMeanKL and TokenTopAgreement pool every token, as llama-perplexity does.
	TokenMeanKL       float64 `json:"token_mean_kl"`
	TokenTopAgreement float64 `json:"token_top_agreement"`
	// RefProb and ArmProb are the mean probability each model gives the
	// text's next token (the reference's token, in a study).
	RefProb float64 `json:"ref_prob"`
	ArmProb float64 `json:"arm_prob"`
}

// Difference is arm B's figures less arm A's, paired by unit.
type Difference struct {
	A            string   `json:"a"`
	B            string   `json:"b"`
	MeanKL       Estimate `json:"mean_kl"`
	P99KL        Estimate `json:"p99_kl"`
	TopAgreement Estimate `json:"top_agreement"`
}

// Options set the bootstrap.
type Options struct {
	Resamples int     // for the means; the percentiles take a fifth as many (each resample sorts every token)
	Level     float64 // e.g. 0.95
	Seed      uint64
}

// DefaultOptions is what `rig fidelity` uses.
var DefaultOptions = Options{Resamples: 10000, Level: 0.95, Seed: 20261206}

// perUnit is each unit's mean KL and top-token agreement.
func perUnit(u Units) (kl, agree []float64, err error) {
	for i, toks := range u.Tokens {
		if len(toks) == 0 {
			return nil, nil, fmt.Errorf("%s: unit %s has no scored token", u.Arm, u.Names[i])
		}
		var s, a float64
		for _, t := range toks {
			s += t.KL
			if t.Agrees() {
				a++
			}
		}
		kl = append(kl, s/float64(len(toks)))
		agree = append(agree, a/float64(len(toks)))
	}
	return kl, agree, nil
}

// pooledP99 is the 99th percentile of KL over the tokens of units idx.
// buf is scratch kept across resamples.
func pooledP99(u Units, idx []int, buf *[]float64) float64 {
	b := (*buf)[:0]
	for _, i := range idx {
		for _, t := range u.Tokens[i] {
			b = append(b, t.KL)
		}
	}
	slices.Sort(b)
	*buf = b
	return quantile(b, 0.99)
}

func all(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// Summarize is one arm's figures with their intervals.
func Summarize(ctx context.Context, u Units, o Options) (Figures, error) {
	kl, agree, err := perUnit(u)
	if err != nil {
		return Figures{}, err
	}
	if len(kl) == 0 {
		return Figures{}, fmt.Errorf("%s: no unit was scored", u.Arm)
	}
	f := Figures{Arm: u.Arm, Units: len(kl)}
	var sumKL, sumAgree, sumRef, sumArm float64
	for _, toks := range u.Tokens {
		for _, t := range toks {
			f.Tokens++
			sumKL += t.KL
			if t.Agrees() {
				sumAgree++
			}
			sumRef += math.Exp(t.RefLogprob)
			sumArm += math.Exp(t.ArmLogprob)
		}
	}
	n := float64(f.Tokens)
	f.TokenMeanKL, f.TokenTopAgreement, f.RefProb, f.ArmProb = sumKL/n, sumAgree/n, sumRef/n, sumArm/n
	if f.MeanKL, err = meanEstimate(ctx, kl, o, 1); err != nil {
		return f, err
	}
	if f.TopAgreement, err = meanEstimate(ctx, agree, o, 2); err != nil {
		return f, err
	}
	buf := make([]float64, 0, f.Tokens)
	f.P99KL.Value = pooledP99(u, all(len(kl)), &buf)
	f.P99KL.Interval, err = unitsInterval(ctx, len(kl), func(idx []int) float64 { return pooledP99(u, idx, &buf) }, max(o.Resamples/5, 1), o.Seed, 3, o.Level)
	return f, err
}

// meanEstimate is the mean of per-unit values with analysis's BCa interval.
func meanEstimate(ctx context.Context, xs []float64, o Options, stream uint64) (Estimate, error) {
	var s float64
	for _, x := range xs {
		s += x
	}
	iv, err := analysis.BootstrapInterval(ctx, xs, o.Resamples, o.Seed, stream, analysis.BCa, o.Level)
	return Estimate{Value: s / float64(len(xs)), Interval: iv}, err
}

// Compare is b's figures less a's, each unit paired with itself: both arms
// must have scored the same units (the same text through the same reference).
func Compare(ctx context.Context, a, b Units, o Options) (Difference, error) {
	d := Difference{A: a.Arm, B: b.Arm}
	if !slices.Equal(a.Names, b.Names) {
		return d, fmt.Errorf("%s and %s scored different units, so they cannot be paired (score both on the same text and reference)", a.Arm, b.Arm)
	}
	for i := range a.Tokens {
		if len(a.Tokens[i]) != len(b.Tokens[i]) {
			return d, fmt.Errorf("unit %s: %s scored %d tokens and %s %d (score both on the same text)", a.Names[i], a.Arm, len(a.Tokens[i]), b.Arm, len(b.Tokens[i]))
		}
	}
	klA, agA, err := perUnit(a)
	if err != nil {
		return d, err
	}
	klB, agB, err := perUnit(b)
	if err != nil {
		return d, err
	}
	diff := func(x, y []float64) []float64 {
		out := make([]float64, len(x))
		for i := range x {
			out[i] = y[i] - x[i]
		}
		return out
	}
	if d.MeanKL, err = meanEstimate(ctx, diff(klA, klB), o, 4); err != nil {
		return d, err
	}
	if d.TopAgreement, err = meanEstimate(ctx, diff(agA, agB), o, 5); err != nil {
		return d, err
	}
	bufA, bufB := []float64{}, []float64{}
	p99 := func(idx []int) float64 { return pooledP99(b, idx, &bufB) - pooledP99(a, idx, &bufA) }
	d.P99KL.Value = p99(all(len(klA)))
	d.P99KL.Interval, err = unitsInterval(ctx, len(klA), p99, max(o.Resamples/5, 1), o.Seed, 6, o.Level)
	return d, err
}
