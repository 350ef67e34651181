package run

// The decision rule's fate before the run: the clauses that depend on the
// design alone (today "underpowered", judged on the planned task count with
// the stated pilot discordance, exactly as the analysis will judge it) are
// evaluated now, in the rule's order, so that a rule certain to assign an
// outcome before a single trial is said so at register, review, freeze, the
// dry run and a try, instead of in the report.

import (
	"fmt"
	"math"

	"rig/analysis"
	"rig/studies"
)

// RuleFate is what the design alone says about its rule's outcome.
type RuleFate struct {
	// Certain is true when the rule assigns Outcome whatever the trials
	// show: every clause before Clause depends on the design alone and
	// cannot hold, and Clause does.
	Certain bool   `json:"certain"`
	Outcome string `json:"outcome,omitempty"`
	Clause  int    `json:"clause,omitempty"` // 1-based; 0 for the rule's otherwise
	// Warning is the sentence to print when Certain.
	Warning string `json:"warning,omitempty"`
}

// FateOfRule evaluates, in order, the clauses of d's rule that depend on the
// design alone, with tasks the planned task ids by job kind (a snapshot's
// Tasks, or the banks as register reads them). It stops at the first clause
// that depends on the trials: from there on, the trials decide.
func FateOfRule(d *studies.Design, tasks map[string][]string) RuleFate {
	n, family := plannedPairTasks(d, tasks)
	for i, c := range d.DecisionRule.Clauses {
		if c.When != studies.WhenUnderpowered {
			return RuleFate{}
		}
		if warn, holds := underpoweredAtPlan(d, n, family); holds {
			return RuleFate{Certain: true, Outcome: c.Assign, Clause: i + 1,
				Warning: fmt.Sprintf("with %d tasks this rule can only say %s (clause %d, underpowered): %s", n, c.Assign, i+1, warn)}
		}
	}
	if len(d.DecisionRule.Clauses) == 0 || d.DecisionRule.Otherwise == "" {
		return RuleFate{}
	}
	return RuleFate{Certain: true, Outcome: d.DecisionRule.Otherwise,
		Warning: fmt.Sprintf("no clause of this rule can hold whatever the trials show: it can only say %s (its otherwise)", d.DecisionRule.Otherwise)}
}

// plannedPairTasks is the fewest planned tasks any named pair has in common
// (the analysis judges "underpowered" on the fewest), and the Holm family:
// the pairs × job kinds where both arms of a pair run.
func plannedPairTasks(d *studies.Design, tasks map[string][]string) (fewest, family int) {
	fewest = -1
	for _, p := range d.ResolvedPairs() {
		for _, jk := range d.JobKinds {
			if p.JobKind != "" && p.JobKind != jk.Name {
				continue
			}
			c, b := d.Arm(p.Challenger), d.Arm(p.Incumbent)
			if c == nil || b == nil || !c.RunsJobKind(jk.Name) || !b.RunsJobKind(jk.Name) {
				continue
			}
			family++
			if n := len(tasks[jk.Name]); fewest < 0 || n < fewest {
				fewest = n
			}
		}
	}
	return max(fewest, 0), family
}

// underpoweredAtPlan judges the "underpowered" check as the analysis will
// (analysis.Design's power plan, Holm's strictest step) on n planned tasks,
// and says what would let the trials decide: the tasks the stated
// difference needs, or the difference n tasks can see.
func underpoweredAtPlan(d *studies.Design, n, family int) (string, bool) {
	pw := d.Power
	if pw.PilotDiscordance <= 0 || pw.SmallestDetectableDifference <= 0 {
		return "", false // the analysis has nothing to judge: it does not hold
	}
	alpha := d.DecisionRule.Alpha
	if alpha == 0 {
		alpha = 0.05
	}
	step := analysis.HolmStepAlpha(alpha, max(family, 1), 1)
	stated := pw.SmallestDetectableDifference
	if n <= 0 {
		return "no named pair has a planned task in common", true
	}
	md, ok := analysis.MinDetectable(n, pw.PilotDiscordance, step, pw.Power)
	if ok && md <= stated {
		return "", false
	}
	need := fmt.Sprintf("no task count can see %.2f at a pilot discordance of %.2f (a lead cannot exceed the discordance)", stated, pw.PilotDiscordance)
	if m, ok := analysis.TasksNeeded(stated, pw.PilotDiscordance, step, pw.Power); ok {
		need = fmt.Sprintf("it needs %d tasks to see %.2f", m, stated)
	}
	if !ok {
		return fmt.Sprintf("%s; %d tasks see no lead at a pilot discordance of %.2f (power %.2f, Holm step alpha %.3g)", need, n, pw.PilotDiscordance, pw.Power, step), true
	}
	return fmt.Sprintf("%s, or a stated difference of %.2f (%d tasks detect %.3f at a pilot discordance of %.2f, power %.2f, Holm step alpha %.3g)",
		need, math.Ceil(md*100)/100, n, md, pw.PilotDiscordance, pw.Power, step), true
}
