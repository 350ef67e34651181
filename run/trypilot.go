package run

// The pilot figures a try measures for the design's power section: per
// named pair, the share of tried tasks on which exactly one arm passed (the
// discordance McNemar's test lives on) with its interval, and the smallest
// lead the planned task count can detect at the stated power with it; per
// arm, the shares of capped and off-task outputs. And the plain sentences a
// newcomer needs first: an arm that passes nothing, a rule that can only
// say one thing.

import (
	"fmt"
	"math"

	"rig/analysis"
	"rig/studies"
)

// PilotPair is one named pair's figures over the tasks both arms answered
// in a try.
type PilotPair struct {
	JobKind     string  `json:"job_kind"`
	Candidate   string  `json:"candidate"`
	Baseline    string  `json:"baseline"`
	Tasks       int     `json:"tasks"`
	Discordant  int     `json:"discordant"`
	Discordance float64 `json:"discordance"`
	Lo          float64 `json:"lo"`
	Hi          float64 `json:"hi"`
	// PlannedTasks is the job kind's planned task count; MinDetectable the
	// lead it detects at Power with this discordance (Detectable false:
	// none).
	PlannedTasks  int     `json:"planned_tasks"`
	Power         float64 `json:"power"`
	MinDetectable float64 `json:"min_detectable,omitempty"`
	Detectable    bool    `json:"detectable"`
}

// PilotArm is one arm's answers in a try.
type PilotArm struct {
	Arm     string `json:"arm"`
	Trials  int    `json:"trials"`
	Passed  int    `json:"passed"`
	Capped  int    `json:"capped"`
	OffTask int    `json:"off_task"`
}

// TryPilot is a try's pilot figures and what they say plainly.
type TryPilot struct {
	Pairs []PilotPair `json:"pairs,omitempty"`
	Arms  []PilotArm  `json:"arms,omitempty"`
	Fate  RuleFate    `json:"fate"`
	Notes []string    `json:"notes,omitempty"`
}

// Pilot reads the try's trials as a pilot of the design d, whose planned
// tasks are planned (the snapshot's Tasks).
func Pilot(d *studies.Design, planned map[string][]string, trials []TryTrial) TryPilot {
	var p TryPilot
	byArm := map[string]*PilotArm{}
	for _, a := range d.Arms {
		if a.Role != studies.RoleJudge {
			p.Arms = append(p.Arms, PilotArm{Arm: a.Name})
		}
	}
	for i := range p.Arms {
		byArm[p.Arms[i].Arm] = &p.Arms[i]
	}
	pass := map[[3]string]bool{} // arm, job kind, task → passed (answered trials only)
	for _, t := range trials {
		a := byArm[t.Arm]
		if a == nil {
			continue
		}
		a.Trials++
		if t.Pass {
			a.Passed++
		}
		if t.Capped {
			a.Capped++
		}
		if t.OffTask != "" {
			a.OffTask++
		}
		if t.Graded {
			pass[[3]string{t.Arm, t.JobKind, t.Task}] = t.Pass
		}
	}
	_, family := plannedPairTasks(d, planned)
	alpha := d.DecisionRule.Alpha
	if alpha == 0 {
		alpha = 0.05
	}
	power := d.Power.Power
	if power == 0 {
		power = 0.8
	}
	for _, rp := range d.ResolvedPairs() {
		for _, jk := range d.JobKinds {
			if rp.JobKind != "" && rp.JobKind != jk.Name {
				continue
			}
			pp, ok := pilotPair(rp.Challenger, rp.Incumbent, jk.Name, pass, trials)
			if !ok {
				continue
			}
			pp.PlannedTasks, pp.Power = len(planned[jk.Name]), power
			if pp.Discordance > 0 {
				md, ok := analysis.MinDetectable(pp.PlannedTasks, pp.Discordance, analysis.HolmStepAlpha(alpha, max(family, 1), 1), power)
				pp.MinDetectable, pp.Detectable = md, ok
				if !ok {
					pp.MinDetectable = 0
				}
			}
			p.Pairs = append(p.Pairs, pp)
		}
	}
	p.Fate = FateOfRule(d, planned)
	p.Notes = pilotNotes(p)
	return p
}

// pilotPair counts the discordant tasks of one pair in one job kind over
// the tasks both arms answered with a grade.
func pilotPair(cand, base, jk string, pass map[[3]string]bool, trials []TryTrial) (PilotPair, bool) {
	pp := PilotPair{JobKind: jk, Candidate: cand, Baseline: base}
	seen := map[string]bool{}
	for _, t := range trials {
		if t.JobKind != jk || seen[t.Task] {
			continue
		}
		c, okc := pass[[3]string{cand, jk, t.Task}]
		b, okb := pass[[3]string{base, jk, t.Task}]
		if !okc || !okb {
			continue
		}
		seen[t.Task] = true
		pp.Tasks++
		if c != b {
			pp.Discordant++
		}
	}
	if pp.Tasks == 0 {
		return pp, false
	}
	ys := make([]float64, pp.Tasks)
	for i := range pp.Discordant {
		ys[i] = 1
	}
	pp.Discordance = float64(pp.Discordant) / float64(pp.Tasks)
	iv := analysis.RateInterval(ys, pp.Tasks, 0.95)
	pp.Lo, pp.Hi = finiteOr(float64(iv.Lo)), finiteOr(float64(iv.Hi))
	return pp, true
}

// pilotNotes are the sentences a try says plainly.
func pilotNotes(p TryPilot) []string {
	var out []string
	for _, a := range p.Arms {
		switch {
		case a.Trials == 0:
		case a.Passed == 0 && a.OffTask == a.Trials:
			out = append(out, fmt.Sprintf("arm %s passes nothing (0 of %d) and every output is off task: it does not answer in the grader's terms (look at its outputs above: a chat template on a base model, or a prompt format the model does not follow)", a.Arm, a.Trials))
		case a.Passed == 0:
			out = append(out, fmt.Sprintf("arm %s passes nothing (0 of %d tried): read its outputs above before sizing a study of it", a.Arm, a.Trials))
		}
	}
	for _, pp := range p.Pairs {
		switch {
		case pp.Discordant == 0:
			out = append(out, fmt.Sprintf("%s vs %s in %s: no task of the %d tried split the pair, so the try gives no discordance to size the study with (try more tasks: --tasks N)", pp.Candidate, pp.Baseline, pp.JobKind, pp.Tasks))
		case !pp.Detectable:
			out = append(out, fmt.Sprintf("%s vs %s in %s: at the tried discordance %.2f, the planned %d tasks detect no lead at power %.2f", pp.Candidate, pp.Baseline, pp.JobKind, pp.Discordance, pp.PlannedTasks, pp.Power))
		}
	}
	if p.Fate.Certain {
		out = append(out, p.Fate.Warning)
	}
	return out
}

// finiteOr is v, or 0 when v is not a number (JSON has no NaN).
func finiteOr(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
