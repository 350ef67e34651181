package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"rig/analysis"
	"rig/receipts"
	"rig/studies"
)

// monitor is an execution's early-stopping check: the design's stopping
// rule over the pairs it names, fed the counted trials in plan order and
// checked at the end of every block. It keeps nothing that the receipts do
// not: a resumed execution walks the same plan over its stored receipts
// and reaches the same checks, so the same answer.
type monitor struct {
	rule  analysis.Stopping
	pairs []analysis.MonitoredPair
	// planned is each arm × job kind × task's planned repeats; values the
	// task values of the repeats counted so far.
	planned map[string]int
	values  map[string][]float64
	// paired marks the tasks each pair has already appended.
	paired []map[string]bool
	look   analysis.Look
}

// ErrStoppedEarly ends an execution whose stopping rule settled every
// monitored comparison before the plan ran out. It is not a failure: the
// execution's status is receipts.StoppedEarly.
var ErrStoppedEarly = errors.New("stopped early")

func monitorKey(arm, kind, task string) string { return arm + "|" + kind + "|" + task }

// newMonitor builds the monitor of a design with a stopping rule, or nil
// when it has none (every planned trial runs). A monitored job kind graded
// by a judge is refused: its grades exist only after the trial loop, so no
// check between blocks could read them.
func newMonitor(d *studies.Design, plan *studies.Plan) (*monitor, error) {
	rule := StoppingRule(d)
	if rule == nil {
		return nil, nil
	}
	m := &monitor{rule: *rule, planned: map[string]int{}, values: map[string][]float64{}}
	for _, t := range plan.Trials {
		m.planned[monitorKey(t.Key.Arm, t.Key.JobKind, t.Key.Task)]++
	}
	kinds := map[string]*studies.JobKind{}
	for i := range d.JobKinds {
		kinds[d.JobKinds[i].Name] = &d.JobKinds[i]
	}
	tasksOf := map[string][]string{} // job kind → its planned tasks, once each
	seen := map[string]bool{}
	for _, t := range plan.Trials {
		if k := t.Key.JobKind + "|" + t.Key.Task; !seen[k] {
			seen[k] = true
			tasksOf[t.Key.JobKind] = append(tasksOf[t.Key.JobKind], t.Key.Task)
		}
	}
	for _, p := range d.ResolvedPairs() {
		jk := kinds[p.JobKind]
		if jk == nil {
			continue
		}
		if jk.Grader.Name == studies.JudgeGrader {
			return nil, fmt.Errorf("design field stopping: job kind %s is graded by a judge, whose grades come after the trial loop, so no check between blocks can read them (leave stopping out, or grade %s with a non-judge grader)", jk.Name, jk.Name)
		}
		measure := analysis.MeasurePass
		if jk.RankingMeasure.Name != "pass_rate" {
			measure = analysis.MeasureScore
		}
		planned := 0
		for _, task := range tasksOf[p.JobKind] {
			if m.planned[monitorKey(p.Challenger, p.JobKind, task)] > 0 && m.planned[monitorKey(p.Incumbent, p.JobKind, task)] > 0 {
				planned++
			}
		}
		if planned == 0 {
			continue
		}
		m.pairs = append(m.pairs, analysis.MonitoredPair{Pair: analysis.Pair{Candidate: p.Challenger, Baseline: p.Incumbent},
			JobKind: p.JobKind, Measure: measure, Gate: 0.5, Planned: planned})
		m.paired = append(m.paired, map[string]bool{})
	}
	if len(m.pairs) == 0 {
		return nil, fmt.Errorf("design field stopping: no pair the decision rule names has paired tasks in the plan, so there is nothing to monitor (name a pair in pairs, or leave stopping out)")
	}
	return m, nil
}

// record adds one counted receipt; a task both arms of a pair have now
// finished (every planned repeat) joins that pair's paired tasks.
func (m *monitor) record(r receipts.Receipt) {
	if !r.Outcome.Counted() {
		return
	}
	k := monitorKey(r.Arm, r.JobKind, r.TaskID)
	v := 0.0
	if r.Grade != nil {
		v = r.Grade.Score
		if m.measureOf(r.JobKind) == analysis.MeasurePass {
			v = 0
			if r.Grade.Pass {
				v = 1
			}
		}
	}
	m.values[k] = append(m.values[k], v)
	for i := range m.pairs {
		mp := &m.pairs[i]
		if mp.JobKind != r.JobKind || (mp.Pair.Candidate != r.Arm && mp.Pair.Baseline != r.Arm) || m.paired[i][r.TaskID] {
			continue
		}
		c, cok := m.mean(monitorKey(mp.Pair.Candidate, mp.JobKind, r.TaskID))
		b, bok := m.mean(monitorKey(mp.Pair.Baseline, mp.JobKind, r.TaskID))
		if cok && bok {
			m.paired[i][r.TaskID] = true
			mp.Tasks = append(mp.Tasks, analysis.PairedTask{Task: r.TaskID, Candidate: c, Baseline: b})
		}
	}
}

func (m *monitor) measureOf(kind string) analysis.Measure {
	for _, mp := range m.pairs {
		if mp.JobKind == kind {
			return mp.Measure
		}
	}
	return analysis.MeasureScore
}

// mean is a task's value for one arm once every planned repeat counted.
func (m *monitor) mean(k string) (float64, bool) {
	vs := m.values[k]
	if n := m.planned[k]; n == 0 || len(vs) < n {
		return 0, false
	}
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs)), true
}

// check is the look at the end of a block. last says the plan has run
// out: a pair still short of its planned tasks then takes its last look.
func (m *monitor) check(last bool) (analysis.Look, error) {
	for i := range m.pairs {
		mp := &m.pairs[i]
		mp.Checks = append(mp.Checks, len(mp.Tasks))
		mp.Final = last && len(mp.Tasks) < mp.Planned
	}
	look, err := analysis.Monitor(analysis.MonitorState{Stopping: m.rule, Pairs: m.pairs})
	if err != nil {
		return look, fmt.Errorf("stopping rule: %w", err)
	}
	m.look = look
	return look, nil
}

// sequential is the execution-level record of the monitor's last look.
func (m *monitor) sequential(stopped bool, notRun []string) analysis.Sequential {
	return analysis.Sequential{Stopping: m.rule, Look: m.look, StoppedEarly: stopped, NotRun: notRun}
}

// putStop stores the monitor's last look on the execution.
func (x *execution) putStop(ctx context.Context, seq analysis.Sequential) error {
	raw, err := json.Marshal(seq)
	if err != nil {
		return err
	}
	return x.store.PutStop(ctx, x.exec.ID, raw)
}

// DescribeStop is one line for the audit and the execution's status: the
// look, its reason, and per pair where it stood.
func DescribeStop(seq analysis.Sequential) string {
	var b strings.Builder
	l := seq.Look
	if seq.StoppedEarly {
		fmt.Fprintf(&b, "stopped early at check %d (%s; %d planned trials not run)", l.Check+1, l.Reason, len(seq.NotRun))
	} else {
		fmt.Fprintf(&b, "stopping rule at check %d: %s", l.Check+1, l.Reason)
	}
	for i, p := range l.Pairs {
		fmt.Fprintf(&b, "; %s %s: %s", p.JobKind, p.Pair, p.Status)
		if p.Direction != "" {
			fmt.Fprintf(&b, " (%s leads)", p.Direction)
		}
		fmt.Fprintf(&b, ", p=%.4g", float64(p.P))
		if i < len(l.HolmP) {
			fmt.Fprintf(&b, ", Holm p=%.4g", l.HolmP[i])
		}
		if g := p.Stagewise; g != nil {
			fmt.Fprintf(&b, ", %s stagewise-exact interval [%.3f, %.3f]", analysis.LevelPercent(g.Level), float64(g.Lo), float64(g.Hi))
		} else {
			fmt.Fprintf(&b, ", %s CS [%.3f, %.3f]", analysis.LevelPercent(p.CS.Level), float64(p.CS.Lo), float64(p.CS.Hi))
		}
		b.WriteString(describePath(p))
	}
	return b.String()
}

// describePath words where a pair's statistic stands against its boundary.
// A crossed pair is read at the check it crossed: its later checks are not
// looks and carry no boundary, and reading one of those as "no count could
// cross the boundary yet" contradicts the crossing (issue 46).
func describePath(p analysis.PairLook) string {
	if p.Status == analysis.StatusCrossed {
		for _, pt := range p.Path {
			if pt.Check == p.StoppedAt && !math.IsNaN(float64(pt.Boundary)) {
				return fmt.Sprintf(", statistic %.4g reached the boundary %.4g at check %d (%d tasks)", pt.Statistic, float64(pt.Boundary), pt.Check+1, pt.Tasks)
			}
		}
	}
	n := len(p.Path)
	if n == 0 {
		return ""
	}
	pt := p.Path[n-1]
	switch bd := float64(pt.Boundary); {
	case !math.IsNaN(bd):
		return fmt.Sprintf(", statistic %.4g vs boundary %.4g after %d tasks", pt.Statistic, bd, pt.Tasks)
	case !pt.Look:
		return fmt.Sprintf(", statistic %.4g after %d tasks (not a look)", pt.Statistic, pt.Tasks)
	}
	return fmt.Sprintf(", statistic %.4g after %d tasks (no count could cross the boundary yet)", pt.Statistic, pt.Tasks)
}

// checkStop checks the stopping rule when trial i ends its block, stores
// the look on the execution, and returns ErrStoppedEarly when every
// monitored comparison is settled. counted, on a replay of stored
// receipts, says which later trials already ran: they are not "not run".
func (x *execution) checkStop(ctx context.Context, plan *studies.Plan, i int, counted map[receipts.TrialKey]receipts.Receipt) error {
	last := i == len(plan.Trials)-1
	if !last && plan.Trials[i+1].Block == plan.Trials[i].Block {
		return nil
	}
	look, err := x.mon.check(last)
	if err != nil {
		return err
	}
	if !look.Stop || last {
		return x.putStop(ctx, x.mon.sequential(false, nil))
	}
	if counted == nil {
		counted, err = x.store.Counted(ctx, x.exec.ID)
		if err != nil {
			return err
		}
	}
	x.notRun = nil
	for _, t := range plan.Trials[i+1:] {
		if _, ok := counted[receiptTrial(t.Key)]; !ok {
			x.notRun = append(x.notRun, analysis.NotRunID(t.Key.Arm, t.Key.JobKind, t.Key.Task, t.Key.Repeat))
		}
	}
	if err := x.putStop(ctx, x.mon.sequential(true, x.notRun)); err != nil {
		return err
	}
	x.env.Log.Info("stopping rule settled every monitored comparison", "study", x.study, "execution", x.exec.ID, "check", look.Check+1, "not_run", len(x.notRun))
	return ErrStoppedEarly
}

// stopEarly ends the trial loop at an early stop: the runtime goes, and
// the trials that ran still get their judge's grades and their fidelity.
func (x *execution) stopEarly(ctx context.Context, stop error) error {
	x.release(ctx)
	if err := x.afterTrials(ctx); err != nil {
		return err
	}
	return stop
}
