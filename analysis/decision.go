package analysis

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Rule is a design's decision rule, written before any run: ordered clauses,
// the first whose conditions all hold decides, else Default.
type Rule struct {
	Clauses []Clause `json:"clauses"`
	// Default applies when no clause holds; if empty it is
	// "no decision at this sample size".
	Default string `json:"default,omitempty"`
}

// Clause is "if every condition holds, then Then". Then is one of
// "accept ARM", "reject ARM", "keep the incumbent", "needs_review",
// "no decision at this sample size", "ship ARM", "hold", "revert".
type Clause struct {
	If   []Condition `json:"if"`
	Then string      `json:"then"`
	// Check names a condition judged on the whole report rather than on one
	// pair's outcome: CheckUnderpowered or CheckPBestBelowBar. A clause with
	// a Check needs no If.
	Check string `json:"check,omitempty"`
	// Number and When are the clause's number and condition as the design
	// wrote them, so the trace can be read against the design file: one
	// design clause about "the challenger" becomes one clause per pair, all
	// with the same Number. Zero Number means the clause's own position.
	Number int    `json:"number,omitempty"`
	When   string `json:"when,omitempty"`
}

// Conditions the analysis judges from its own figures (Clause.Check).
const (
	// CheckUnderpowered holds when the tasks every tested pair has in common
	// cannot detect the design's stated smallest difference (Design.Power)
	// with the stated power at Holm's strictest step.
	CheckUnderpowered = "underpowered"
	// CheckPBestBelowBar holds when, in any job kind, the leader's P(best)
	// is under the design's bar (the ranking is a tie) or cannot be computed.
	CheckPBestBelowBar = "p_best_below_bar"
)

// Condition holds when the named pair's outcome is one of Outcomes in the
// named job kind (in every job kind when JobKind is empty) and the delta is
// at least MinDelta away from zero.
type Condition struct {
	Outcomes  []Outcome `json:"outcomes"`
	Candidate string    `json:"candidate"`
	Baseline  string    `json:"baseline"`
	JobKind   string    `json:"job_kind,omitempty"`
	MinDelta  float64   `json:"min_delta,omitempty"`
}

// NoDecision is the default action.
const NoDecision = "no decision at this sample size"

// OutcomeKeep is the action a blocked winner gives way to.
const OutcomeKeep = "keep the incumbent"

// Verdict is the kind of action a rule assigns.
type Verdict string

const (
	Accept      Verdict = "accept"
	Reject      Verdict = "reject"
	Keep        Verdict = "keep"
	NeedsReview Verdict = "needs_review"
	Undecided   Verdict = "no_decision"
	Ship        Verdict = "ship"
	Hold        Verdict = "hold"
	Revert      Verdict = "revert"
)

// Decision is the rule's result with the logic that produced it.
type Decision struct {
	Action  string  `json:"action"`
	Verdict Verdict `json:"verdict"`
	Arm     string  `json:"arm,omitempty"` // the arm an accept/reject/ship names
	// Clause is the 1-based clause that decided, 0 for the default.
	Clause int `json:"clause"`
	// NextBaseline is the baseline the next study starts from.
	NextBaseline   string   `json:"next_baseline"`
	Trace          []string `json:"trace"`
	ComparisonHash string   `json:"comparison_hash"`
}

func parseAction(s string) (Verdict, string, bool) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "keep the incumbent", "keep":
		return Keep, "", true
	case NoDecision, "no_decision":
		return Undecided, "", true
	case "needs_review", "needs review":
		return NeedsReview, "", true
	case "hold":
		return Hold, "", true
	case "revert":
		return Revert, "", true
	}
	verb, arm, ok := strings.Cut(s, " ")
	if !ok || strings.TrimSpace(arm) == "" {
		return "", "", false
	}
	switch v := Verdict(strings.ToLower(verb)); v {
	case Accept, Reject, Ship:
		return v, strings.TrimSpace(arm), true
	}
	return "", "", false
}

func (r Rule) validate(d Design, arms []string) error {
	named := map[Pair]bool{}
	for _, p := range d.Pairs {
		named[p] = true
	}
	kinds := map[string]bool{}
	for _, k := range d.JobKinds {
		kinds[k.Name] = true
	}
	isArm := func(a string) bool { return slices.Contains(arms, a) }
	for i, c := range r.Clauses {
		f := fmt.Sprintf("design.rule.clauses[%d]", i)
		switch c.Check {
		case "":
		case CheckUnderpowered, CheckPBestBelowBar:
			if err := checkAction(d, f+".then", c.Then, arms); err != nil {
				return err
			}
			continue
		default:
			return &FieldError{Field: f + ".check", Problem: fmt.Sprintf("%q is not a check", c.Check), Fix: `use "underpowered" or "p_best_below_bar", or leave it empty`}
		}
		if len(c.If) == 0 {
			return &FieldError{Field: f + ".if", Problem: "no conditions", Fix: "a clause needs at least one condition; use rule.default for the fallback"}
		}
		for j, cond := range c.If {
			cf := fmt.Sprintf("%s.if[%d]", f, j)
			if !isArm(cond.Candidate) {
				return &UnknownArmError{Field: cf + ".candidate", Arm: cond.Candidate, Known: arms}
			}
			if !isArm(cond.Baseline) {
				return &UnknownArmError{Field: cf + ".baseline", Arm: cond.Baseline, Known: arms}
			}
			p := Pair{Candidate: cond.Candidate, Baseline: cond.Baseline}
			if !named[p] {
				return &FieldError{Field: cf, Problem: fmt.Sprintf("pair %s is not named in design.pairs", p), Fix: "a rule may only cite pairs named before the run"}
			}
			if cond.JobKind != "" && !kinds[cond.JobKind] {
				return &FieldError{Field: cf + ".job_kind", Problem: fmt.Sprintf("%q is not declared", cond.JobKind), Fix: "name a job kind from design.job_kinds or leave it empty for all"}
			}
			if len(cond.Outcomes) == 0 {
				return &FieldError{Field: cf + ".outcomes", Problem: "empty", Fix: "list the outcomes that satisfy the condition"}
			}
			for _, o := range cond.Outcomes {
				if !outcomes[o] {
					return &FieldError{Field: cf + ".outcomes", Problem: fmt.Sprintf("%q is not an outcome", o), Fix: "use improvement, regression, tradeoff, tie, inconclusive or not_comparable"}
				}
			}
			if cond.MinDelta < 0 || math.IsNaN(cond.MinDelta) {
				return &FieldError{Field: cf + ".min_delta", Problem: fmt.Sprintf("%v is negative", cond.MinDelta), Fix: "min_delta is a distance from zero"}
			}
		}
		if err := checkAction(d, f+".then", c.Then, arms); err != nil {
			return err
		}
	}
	if r.Default != "" {
		return checkAction(d, "design.rule.default", r.Default, arms)
	}
	return nil
}

func checkAction(d Design, field, action string, arms []string) error {
	v, arm, ok := parseAction(action)
	if !ok {
		return &FieldError{Field: field, Problem: fmt.Sprintf("%q is not an action", action), Fix: `use "accept ARM", "reject ARM", "keep the incumbent", "needs_review", "no decision at this sample size", "ship ARM", "hold" or "revert"`}
	}
	if arm == "" {
		return nil
	}
	if !slices.Contains(arms, arm) {
		return &UnknownArmError{Field: field, Arm: arm, Known: arms}
	}
	if v == Accept || v == Ship {
		if arm == d.Incumbent {
			return &FieldError{Field: field, Problem: fmt.Sprintf("accepting %q, the incumbent", arm), Fix: "accepting needs a non-baseline winner; use \"keep the incumbent\""}
		}
		for _, p := range d.Pairs {
			if p.Candidate == arm {
				return nil
			}
		}
		return &FieldError{Field: field, Problem: fmt.Sprintf("%q is never a candidate in design.pairs", arm), Fix: "only an arm tested as a candidate can be accepted"}
	}
	return nil
}

// evaluate runs the rule on the report, clause by clause, and traces every
// clause as the design wrote it: clauses after the deciding one are listed
// as not reached, so a reader never wonders where a written clause went.
func (r Rule) evaluate(d Design, rep *Report) (Decision, error) {
	dec := Decision{NextBaseline: d.Incumbent}
	decided, number := -1, 0
	for i, c := range r.Clauses {
		n := c.Number
		if n == 0 {
			n = i + 1
		}
		label := fmt.Sprintf("clause %d", n)
		if c.When != "" {
			label += " (" + c.When + ")"
		}
		if decided >= 0 {
			// A written clause may stand for one check per pair: it is
			// listed once, as the design wrote it once.
			if i > 0 && r.Clauses[i-1].Number == c.Number && c.Number != 0 {
				continue
			}
			dec.Trace = append(dec.Trace, fmt.Sprintf("%s: not reached, clause %d decided first", label, number))
			continue
		}
		holds, desc := c.eval(d, rep)
		verdict := "does not hold"
		if holds {
			verdict = "holds"
		}
		dec.Trace = append(dec.Trace, fmt.Sprintf("%s: if %s → %s", label, desc, verdict))
		if holds {
			decided, number = i, n
		}
	}
	if decided >= 0 {
		return dec.take(r.Clauses[decided].Then, number, rep), nil
	}
	def := r.Default
	if def == "" {
		def = NoDecision
	}
	dec.Trace = append(dec.Trace, "no clause holds: default")
	return dec.take(def, 0, rep), nil
}

func (c Clause) eval(d Design, rep *Report) (bool, string) {
	switch c.Check {
	case CheckUnderpowered:
		return underpowered(d, rep)
	case CheckPBestBelowBar:
		return pBestBelowBar(d, rep)
	}
	holds := true
	var parts []string
	for _, cond := range c.If {
		ok, desc := cond.eval(rep)
		parts = append(parts, desc)
		holds = holds && ok
	}
	return holds, strings.Join(parts, " and ")
}

// underpowered judges the sizing on the tasks that were actually paired, with
// the pilot's discordance rather than the observed one, so that the verdict
// does not depend on the outcome it gates. A pair a stopping rule monitored
// is judged at its planned size: when the study stopped depends on the
// outcome, and the boundaries were drawn for the whole plan.
func underpowered(d Design, rep *Report) (bool, string) {
	pw := d.Power
	if pw == nil || pw.SmallestDifference <= 0 {
		return false, "the task count cannot see the stated difference [no power.smallest_detectable_difference and pilot_discordance stated, so nothing to judge: does not hold]"
	}
	tasks, pair := -1, ""
	for _, p := range rep.Pairs {
		if p.notComparable != "" {
			continue
		}
		n := rep.Sequential.plannedTasks(p)
		if tasks < 0 || n < tasks {
			tasks, pair = n, fmt.Sprintf("%s vs %s in %s", p.Candidate, p.Baseline, p.JobKind)
			if n != p.Tasks {
				pair += fmt.Sprintf(", as planned; %d paired before the early stop", p.Tasks)
			}
		}
	}
	desc := fmt.Sprintf("the task count cannot see the stated difference %.3g (pilot discordance %.3g, power %.2f, Holm step alpha %.3g)", pw.SmallestDifference, pw.PilotDiscordance, pw.Power, HolmStepAlpha(d.Alpha, max(rep.HolmFamily, 1), 1))
	if tasks <= 0 {
		return true, desc + " [no pair has paired tasks]"
	}
	md, ok := MinDetectable(tasks, pw.PilotDiscordance, HolmStepAlpha(d.Alpha, max(rep.HolmFamily, 1), 1), pw.Power)
	if !ok {
		return true, fmt.Sprintf("%s [%d paired tasks (fewest, %s) cannot detect any lead]", desc, tasks, pair)
	}
	cmp := "≤"
	if md > pw.SmallestDifference {
		cmp = ">"
	}
	return md > pw.SmallestDifference, fmt.Sprintf("%s [%d paired tasks (fewest, %s) detect a lead of %.3f, %s the stated %.3g]", desc, tasks, pair, md, cmp, pw.SmallestDifference)
}

func pBestBelowBar(d Design, rep *Report) (bool, string) {
	desc := fmt.Sprintf("the leader's P(best) is under the bar %.3g in any job kind", d.PBestBar)
	holds := false
	var got []string
	for _, k := range rep.Kinds {
		switch {
		case k.RankBy != "":
			// Its pairs are judged on fidelity; P(best) here would be the
			// pass rates', which do not rank it.
			got = append(got, fmt.Sprintf("%s: ranked by %s, no P(best) read: no", k.JobKind, k.RankBy))
		case k.Verdict == "no common tasks" || !k.LeaderPBest.Valid():
			holds = true
			got = append(got, fmt.Sprintf("%s: no P(best) (%s): yes", k.JobKind, k.Verdict))
		case k.Leader == "":
			holds = true
			got = append(got, fmt.Sprintf("%s: no single leader (%s share the top, P(best) %.3f) < %.3g: yes", k.JobKind, strings.Join(k.TiedWith, ", "), float64(k.LeaderPBest), d.PBestBar))
		case float64(k.LeaderPBest) < d.PBestBar:
			holds = true
			got = append(got, fmt.Sprintf("%s: leader %s P(best) %.3f < %.3g: yes", k.JobKind, k.Leader, float64(k.LeaderPBest), d.PBestBar))
		default:
			got = append(got, fmt.Sprintf("%s: leader %s P(best) %.3f ≥ %.3g: no", k.JobKind, k.Leader, float64(k.LeaderPBest), d.PBestBar))
		}
	}
	if len(rep.Kinds) == 0 {
		holds = true
		got = append(got, "no job kind was ranked")
	}
	return holds, desc + " [" + strings.Join(got, "; ") + "]"
}

// take records the action. Accepting (or shipping) needs an eligible winner:
// the arm must be shown better than its baseline in at least one job kind
// (an improvement, or a tradeoff on the better-score side). A rule that would
// accept anything else is sent to review instead of being obeyed.
func (d Decision) take(action string, clause int, rep *Report) Decision {
	v, arm, _ := parseAction(action)
	if (v == Accept || v == Ship) && !eligible(rep, arm) {
		d.Trace = append(d.Trace, fmt.Sprintf("%q refused: %s is not shown better than its baseline in any job kind", action, arm))
		action, v, arm = "needs_review", NeedsReview, ""
	}
	if v == Accept || v == Ship {
		// Guardrails and the winner policy can say no, never yes.
		if blocked := rep.blocking(arm); len(blocked) > 0 {
			for _, c := range blocked {
				d.Trace = append(d.Trace, fmt.Sprintf("%q blocked by %s", action, c))
			}
			action, v, arm = OutcomeKeep, Keep, ""
		}
	}
	d.Action, d.Verdict, d.Arm, d.Clause = action, v, arm, clause
	if (v == Accept || v == Ship) && arm != "" {
		d.NextBaseline = arm
	}
	d.Trace = append(d.Trace, "then: "+action+"; next baseline: "+orNone(d.NextBaseline))
	return d
}

func orNone(s string) string {
	if s == "" {
		return "(none declared)"
	}
	return s
}

func (c Condition) eval(rep *Report) (bool, string) {
	var os []string
	for _, o := range c.Outcomes {
		os = append(os, string(o))
	}
	where := "every job kind"
	if c.JobKind != "" {
		where = c.JobKind
	}
	desc := fmt.Sprintf("%s on %s vs %s in %s", strings.Join(os, " or "), c.Candidate, c.Baseline, where)
	if c.MinDelta > 0 {
		desc += fmt.Sprintf(" with |delta| ≥ %.3g", c.MinDelta)
	}
	holds, seen := true, 0
	var got []string
	for _, p := range rep.Pairs {
		if p.Candidate != c.Candidate || p.Baseline != c.Baseline || (c.JobKind != "" && p.JobKind != c.JobKind) {
			continue
		}
		seen++
		ok := slices.Contains(c.Outcomes, p.Outcome)
		delta := float64(p.Delta)
		if c.MinDelta > 0 && !(p.Delta.Valid() && math.Abs(delta) >= c.MinDelta) {
			ok = false
		}
		mark := "yes"
		if !ok {
			mark = "no"
		}
		if p.byFidelity {
			got = append(got, fmt.Sprintf("%s: %s, mean KL delta %s [%s, %s] nats/token: %s", p.JobKind, p.Outcome, signed4(delta), signed4(float64(p.Interval.Lo)), signed4(float64(p.Interval.Hi)), mark))
		} else {
			got = append(got, fmt.Sprintf("%s: %s, delta %+.3f, Holm p %.3g: %s", p.JobKind, p.Outcome, delta, float64(p.PHolm), mark))
		}
		holds = holds && ok
	}
	if seen == 0 {
		holds = false
		got = append(got, "no result for this pair")
	}
	return holds, desc + " [" + strings.Join(got, "; ") + "]"
}

func eligible(rep *Report, arm string) bool {
	for _, p := range rep.Pairs {
		if p.Candidate == arm && (p.Outcome == Improvement || (p.Outcome == Tradeoff && p.direction > 0)) {
			return true
		}
	}
	return false
}
