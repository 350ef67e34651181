// Package stoprule is the one check of an early-stopping rule's values and
// their vocabulary, shared by the two packages that hold such a rule: studies
// (the design, whose validation reports it) and analysis (the monitor, which
// refuses a rule it cannot run). Neither may import the other, so the check
// lives here, on plain values. It does not resolve defaults (studies does)
// nor compute boundaries (analysis does).
package stoprule

import "fmt"

// The methods and spending functions a rule may name.
const (
	Anytime         = "anytime"
	GroupSequential = "group_sequential"
	OBrienFleming   = "obrien_fleming"
	Pocock          = "pocock"
)

// DefaultFutilityBeta is the chance, at most, that a comparison truly
// differing by the stated difference is stopped as futile, when the rule
// says none.
const DefaultFutilityBeta = 0.05

// Rule is a stopping rule with its defaults resolved.
type Rule struct {
	Method       string
	Looks        []float64
	Spending     string
	Alpha        float64
	Futility     float64 // 0: no futility stop
	FutilityBeta float64 // 0: DefaultFutilityBeta
	Discordance  float64 // the pilot's ψ; 0 when none is stated
}

// Problem is the first thing wrong with a rule: the design field, what is
// wrong with it, and the fix.
type Problem struct {
	Field, Problem, Fix string
}

// Check returns the rule's first problem, or nil.
func (r Rule) Check() *Problem {
	bad := func(field, problem, fix string) *Problem { return &Problem{Field: field, Problem: problem, Fix: fix} }
	switch r.Method {
	case Anytime:
		if len(r.Looks) > 0 {
			return bad("stopping.looks", "set for the anytime method", `an anytime test looks after every block; remove looks, or use "group_sequential"`)
		}
	case GroupSequential:
		if r.Spending != OBrienFleming && r.Spending != Pocock {
			return bad("stopping.spending", fmt.Sprintf("%q is not a spending function", r.Spending), fmt.Sprintf("use %q or %q", OBrienFleming, Pocock))
		}
		for i, t := range r.Looks {
			if !(t > 0 && t <= 1) || (i > 0 && t <= r.Looks[i-1]) {
				return bad(fmt.Sprintf("stopping.looks[%d]", i), fmt.Sprintf("%v is not above the previous look and within (0,1]", t), "list increasing shares of the planned tasks, e.g. [0.25, 0.5, 0.75, 1]")
			}
		}
		if n := len(r.Looks); n > 0 && r.Looks[n-1] != 1 {
			return bad(fmt.Sprintf("stopping.looks[%d]", n-1), fmt.Sprintf("%v: the last look is not 1", r.Looks[n-1]), "end the looks with 1: the full plan is always the last look")
		}
	default:
		return bad("stopping.method", fmt.Sprintf("%q is not a method", r.Method), fmt.Sprintf("use %q or %q", Anytime, GroupSequential))
	}
	if !(r.Alpha > 0 && r.Alpha < 1) {
		return bad("stopping.alpha", fmt.Sprintf("%v is outside (0,1)", r.Alpha), "the family-wise alpha, e.g. 0.05")
	}
	if !(r.Futility >= 0 && r.Futility < 1) {
		return bad("stopping.futility.difference", fmt.Sprintf("%v is outside [0,1)", r.Futility), "the smallest difference worth finding, e.g. 0.2")
	}
	if !(r.Discordance >= 0 && r.Discordance <= 1) {
		return bad("stopping.discordance", fmt.Sprintf("%v is outside [0,1]", r.Discordance), "the pilot's share of discordant tasks")
	}
	if r.Discordance > 0 && r.Futility > r.Discordance {
		return bad("stopping.futility.difference", fmt.Sprintf("%v is above the pilot discordance %v", r.Futility, r.Discordance), "a lead cannot exceed the share of tasks where the arms differ; state a smaller difference")
	}
	if !(r.FutilityBeta >= 0 && r.FutilityBeta < 0.5) {
		return bad("stopping.futility.beta", fmt.Sprintf("%v is outside [0,0.5)", r.FutilityBeta), fmt.Sprintf("a small chance such as %v, or leave it out", DefaultFutilityBeta))
	}
	return nil
}
