package studies

import (
	"fmt"
	"rig/internal/stoprule"
)

// Stopping is the design's rule for stopping an execution early, frozen
// with the rest of the design (so part of its hash). It monitors the pairs
// the decision rule names (ResolvedPairs) between blocks of the plan; the
// execution stops when every one of them has crossed its efficacy boundary
// or been shown futile. Left out, every planned trial runs.
type Stopping struct {
	// Method is "anytime" (e-values, valid at every block) or
	// "group_sequential" (Lan–DeMets alpha spending at planned looks).
	Method string `json:"method"`
	// Looks are a group-sequential design's looks as shares of each pair's
	// planned paired tasks, increasing and ending at 1; left out, every
	// block is a look.
	Looks []float64 `json:"looks,omitempty"`
	// Spending is the group-sequential alpha-spending function:
	// "obrien_fleming" (spends little early) or "pocock" (evenly).
	Spending string `json:"spending,omitempty"`
	// Futility, when set, also stops a pair shown unable to reach the
	// stated difference.
	Futility *Futility `json:"futility,omitempty"`
	// Alpha is the family-wise level the boundaries spend, split evenly
	// over the monitored pairs; left out, decision_rule.alpha.
	Alpha float64 `json:"alpha,omitempty"`
}

// Futility is the futility part of a stopping rule.
type Futility struct {
	// Difference is the smallest difference worth finding (a share of
	// tasks); left out, power.smallest_detectable_difference.
	Difference float64 `json:"difference,omitempty"`
	// Beta bounds the chance that a challenger truly at the difference is
	// stopped as futile (power given up); left out, 0.05.
	Beta float64 `json:"beta,omitempty"`
}

// Stopping methods and spending functions a design may name: the words of
// internal/stoprule, which analysis's SequentialMethod and Spending values
// are too (studies imports no analysis).
const (
	StopAnytime         = stoprule.Anytime
	StopGroupSequential = stoprule.GroupSequential
	SpendOBrienFleming  = stoprule.OBrienFleming
	SpendPocock         = stoprule.Pocock
)

// DefaultFutilityBeta is the futility beta a rule that leaves it out gets,
// the same constant analysis uses.
const DefaultFutilityBeta = stoprule.DefaultFutilityBeta

// MaxLooks bounds a group-sequential design's planned looks.
const MaxLooks = 100

// ResolvedStopping is the design's stopping rule with every default
// resolved from the design: alpha from the decision rule, the futility
// difference and the discordance from the power plan. run.StoppingRule
// converts it for analysis.Monitor, which the runner feeds one monitored
// pair per entry of ResolvedPairs.
type ResolvedStopping struct {
	Method       string
	Looks        []float64
	Spending     string
	Alpha        float64
	Futility     float64 // 0: no futility stop
	FutilityBeta float64 // 0: DefaultFutilityBeta
	Discordance  float64 // the pilot's ψ; 0 when the power plan states none
}

// ResolvedStopping is the design's stopping rule with its defaults
// resolved, or nil when the design has none.
func (d *Design) ResolvedStopping() *ResolvedStopping {
	s := d.Stopping
	if s == nil {
		return nil
	}
	out := &ResolvedStopping{
		Method:      s.Method,
		Looks:       s.Looks,
		Spending:    s.Spending,
		Alpha:       s.Alpha,
		Discordance: d.Power.PilotDiscordance,
	}
	if out.Alpha == 0 {
		out.Alpha = d.DecisionRule.Alpha
	}
	if f := s.Futility; f != nil {
		out.Futility, out.FutilityBeta = f.Difference, f.Beta
		if out.Futility == 0 {
			out.Futility = d.Power.SmallestDetectableDifference
		}
	}
	return out
}

// Check returns the first field of the resolved rule that the monitor could
// not run with, naming the fix, or nil: internal/stoprule's check, the one
// analysis's Stopping.Validate makes too, so a design that validates is one
// the runner's monitor accepts.
func (r ResolvedStopping) Check() *Problem {
	p := stoprule.Rule(r).Check()
	if p == nil {
		return nil
	}
	return &Problem{Path: p.Field, Kind: KindInvalid, Msg: fmt.Sprintf("%s (%s)", p.Problem, p.Fix)}
}

func (v *validator) stopping() {
	s := v.d.Stopping
	if s == nil {
		return
	}
	switch {
	case s.Method == StopAnytime && s.Spending != "":
		v.add(KindInvalid, "stopping.spending", "%q: an anytime rule spends no alpha at looks; remove spending, or set method \"group_sequential\"", s.Spending)
	case s.Method == StopGroupSequential && s.Spending == "":
		v.add(KindMissing, "stopping.spending", "a group-sequential rule needs its alpha-spending function: write %q (spends little early) or %q (evenly)", SpendOBrienFleming, SpendPocock)
	}
	if n := len(s.Looks); n > MaxLooks {
		v.add(KindInvalid, "stopping.looks", "%d looks: at most %d (leave looks out for a look after every block)", n, MaxLooks)
	}
	if ra := v.d.DecisionRule.Alpha; s.Alpha != 0 && ra > 0 && s.Alpha > ra {
		v.add(KindInvalid, "stopping.alpha", "%v is above decision_rule.alpha %v: the boundaries cannot spend more than the family's alpha (lower it, or leave it out to use %v)", s.Alpha, ra, ra)
	}
	if s.Futility != nil && s.Futility.Difference == 0 && v.d.Power.SmallestDetectableDifference <= 0 {
		v.add(KindMissing, "stopping.futility.difference", "give the smallest difference worth finding, or state power.smallest_detectable_difference for it to default to")
	}
	if len(v.d.ResolvedPairs()) == 0 {
		v.add(KindMissing, "stopping", "no pair to monitor: the rule monitors the pairs the decision rule names (name them in pairs, or give the job kind an incumbent and a candidate)")
	}
	rule := v.d.ResolvedStopping()
	// A default taken from a field that is itself wrong is reported there.
	if !(rule.Alpha > 0 && rule.Alpha < 1) && s.Alpha == 0 {
		rule.Alpha = 0.05
	}
	if !(rule.Discordance > 0 && rule.Discordance <= 1) {
		rule.Discordance = 0
	}
	if p := rule.Check(); p != nil && !v.has(p.Path) {
		v.add(p.Kind, p.Path, "%s", p.Msg)
	}
}

// has reports whether a problem is already recorded at the path.
func (v *validator) has(path string) bool {
	for _, p := range v.probs {
		if p.Path == path {
			return true
		}
	}
	return false
}
