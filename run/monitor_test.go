package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/analysis"
	"rig/internal/provision"
	"rig/receipts"
	"rig/report"
	"rig/studies"
)

// stopDesign is a two-arm pass/fail design with a stopping rule, and its
// plan: tasks in blocks of eight, each block the incumbent's trials then the
// candidate's (the shape the seeded plan has).
func stopDesign(method string, tasks int) (*studies.Design, *studies.Plan) {
	d := &studies.Design{Name: "stop-test",
		Arms:         []studies.Arm{{Name: "inc", Role: studies.RoleIncumbent}, {Name: "cand", Role: studies.RoleCandidate}},
		JobKinds:     []studies.JobKind{{Name: "jk", RankingMeasure: studies.Measure{Name: "pass_rate"}, Grader: studies.Grader{Name: "json", Version: 1}}},
		DecisionRule: studies.DecisionRule{Alpha: 0.05},
		Stopping:     &studies.Stopping{Method: method}}
	if method == studies.StopGroupSequential {
		d.Stopping.Spending = studies.SpendOBrienFleming
	}
	p := &studies.Plan{}
	for b := 0; b*8 < tasks; b++ {
		for _, arm := range []string{"inc", "cand"} {
			for t := b * 8; t < min(tasks, (b+1)*8); t++ {
				p.Trials = append(p.Trials, studies.Trial{Key: studies.TrialKey{Arm: arm, JobKind: "jk", Task: fmt.Sprintf("t%02d", t)}, Block: b})
			}
		}
		p.Blocks++
	}
	return d, p
}

// stopExecution is an execution with a store and the monitor, no runtime:
// the trial loop's check between blocks is under test, fed receipts a fake
// grade decides (candidate passes, incumbent fails: every task discordant).
func stopExecution(t *testing.T, d *studies.Design, plan *studies.Plan) (*execution, *receipts.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := receipts.Open(filepath.Join(t.TempDir(), "store.bolt"), d.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	exec := receipts.Execution{ID: "exec-1", Attempt: 1, Status: receipts.Running, DesignHash: "h", CreatedAt: time.Now().UTC()}
	if err := st.Freeze(ctx, "h", receipts.Transition{To: "frozen", Who: "test", Why: "frozen for the stop test", At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutExecution(ctx, exec); err != nil {
		t.Fatal(err)
	}
	x := &execution{trialRunner: &trialRunner{env: Env{Log: slog.Default()}, study: d.Name, design: d, exec: exec}, store: st}
	if x.mon, err = newMonitor(d, plan); err != nil {
		t.Fatal(err)
	}
	return x, st
}

func fakeGraded(k studies.TrialKey, pass bool) receipts.Receipt {
	return receipts.Receipt{Arm: k.Arm, JobKind: k.JobKind, TaskID: k.Task, Repeat: k.Repeat, Outcome: receipts.Scored, Grade: &receipts.Grade{Pass: pass, Score: map[bool]float64{true: 1}[pass]}}
}

// walk feeds the plan's trials to the monitor as the loop does, and returns
// the index of the trial whose block end stopped it (-1 if none).
func walk(t *testing.T, x *execution, plan *studies.Plan, pass func(studies.TrialKey) bool, counted map[receipts.TrialKey]receipts.Receipt) int {
	t.Helper()
	for i, tr := range plan.Trials {
		rec := fakeGraded(tr.Key, pass(tr.Key))
		counted[receiptTrial(tr.Key)] = rec
		x.mon.record(rec)
		err := x.checkStop(context.Background(), plan, i, counted)
		if errors.Is(err, ErrStoppedEarly) {
			return i
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return -1
}

// A candidate that passes every task its incumbent fails crosses the
// anytime boundary (E = 2^n/(n+1) ≥ 20 at n = 8) at the first block's end:
// the execution stops there, the rest are listed as not run, and the look
// goes on the store. A resumed execution replaying the same receipts stops
// at the same check.
func TestRunnerStopsEarlyWhenEveryMonitoredPairCrosses(t *testing.T) {
	d, plan := stopDesign(studies.StopAnytime, 40)
	x, st := stopExecution(t, d, plan)
	candWins := func(k studies.TrialKey) bool { return k.Arm == "cand" }
	at := walk(t, x, plan, candWins, map[receipts.TrialKey]receipts.Receipt{})
	if at != 15 {
		t.Fatalf("stopped after trial %d, want 15 (the end of the first block)", at)
	}
	if len(x.notRun) != len(plan.Trials)-16 {
		t.Fatalf("%d trials not run, want %d", len(x.notRun), len(plan.Trials)-16)
	}
	raw, found, err := st.Stop(context.Background(), "exec-1")
	if err != nil || !found {
		t.Fatalf("no stop record (%v)", err)
	}
	var seq analysis.Sequential
	if err := json.Unmarshal(raw, &seq); err != nil {
		t.Fatal(err)
	}
	pl := seq.Look.Pairs[0]
	if !seq.StoppedEarly || !seq.Look.Stop || seq.Look.Check != 0 || pl.Status != analysis.StatusCrossed || pl.Direction != "candidate" || pl.Tasks != 8 || float64(pl.P) > 0.05 {
		t.Fatalf("stop record %+v, pair %+v", seq.Look, pl)
	}
	line := DescribeStop(seq)
	if !strings.Contains(line, "stopped early at check 1") || !strings.Contains(line, "64 planned trials not run") || !strings.Contains(line, "crossed (candidate leads)") {
		t.Fatalf("audit line %q", line)
	}
	// Resume: a fresh monitor over the stored receipts reaches the same stop.
	x2, _ := stopExecution(t, d, plan)
	counted := map[receipts.TrialKey]receipts.Receipt{}
	if again := walk(t, x2, plan, candWins, counted); again != at || x2.mon.look.Check != seq.Look.Check {
		t.Fatalf("resumed run stopped after trial %d at check %d, first run %d at %d", again, x2.mon.look.Check, at, seq.Look.Check)
	}
}

// Arms that agree on every task never cross: the plan runs to its end,
// and the last look is stored as not stopped.
func TestRunnerRunsToTheEndWhenNothingIsSettled(t *testing.T) {
	d, plan := stopDesign(studies.StopGroupSequential, 24)
	x, st := stopExecution(t, d, plan)
	if at := walk(t, x, plan, func(k studies.TrialKey) bool { return k.Task < "t12" }, map[receipts.TrialKey]receipts.Receipt{}); at != -1 {
		t.Fatalf("stopped after trial %d with no discordant task", at)
	}
	raw, found, err := st.Stop(context.Background(), "exec-1")
	if err != nil || !found {
		t.Fatalf("no record of the last look (%v)", err)
	}
	var seq analysis.Sequential
	if err := json.Unmarshal(raw, &seq); err != nil {
		t.Fatal(err)
	}
	if seq.StoppedEarly || !seq.Look.End || seq.Look.Pairs[0].Tasks != 24 || len(seq.Look.Pairs[0].Path) != 3 {
		t.Fatalf("last look %+v", seq.Look)
	}
}

// A monitored job kind graded by a judge cannot be checked between blocks:
// the runner refuses it, naming the field.
func TestRunnerRefusesStoppingOnAJudgedKind(t *testing.T) {
	d, plan := stopDesign(studies.StopAnytime, 8)
	d.JobKinds[0].Grader.Name = studies.JudgeGrader
	if _, err := newMonitor(d, plan); err == nil || !strings.Contains(err.Error(), "design field stopping") {
		t.Fatalf("got %v, want a refusal naming design field stopping", err)
	}
}

// The analysis takes a monitored pair's p-value and interval from the
// stop, lists the unrun tasks as not run rather than missing, and the
// report draws the path: HTML figure, Markdown table and JSON.
func TestStoppedExecutionAnalysesAndReports(t *testing.T) {
	d, plan := stopDesign(studies.StopAnytime, 40)
	x, _ := stopExecution(t, d, plan)
	var trials []analysis.Trial
	candWins := func(k studies.TrialKey) bool { return k.Arm == "cand" }
	at := walk(t, x, plan, candWins, map[receipts.TrialKey]receipts.Receipt{})
	for _, tr := range plan.Trials[:at+1] {
		trials = append(trials, analysis.Trial{DesignHash: "h", Arm: tr.Key.Arm, JobKind: "jk", Task: tr.Key.Task, Pass: candWins(tr.Key), Score: map[bool]float64{true: 1}[candWins(tr.Key)], WallSeconds: 1})
	}
	seq := x.mon.sequential(true, x.notRun)
	in := analysis.Input{Design: analysis.Design{Hash: "h", Arms: []analysis.Arm{{Name: "inc"}, {Name: "cand"}},
		JobKinds: []analysis.JobKind{{Name: "jk", Measure: analysis.MeasurePass, Gate: 0.5}},
		Pairs:    []analysis.Pair{{Candidate: "cand", Baseline: "inc"}}, Incumbent: "inc", Alpha: 0.05, Resamples: 10000, PermutationResamples: 10000, Seed: 1, Level: 0.95, Interval: analysis.Percentile, CostMeasure: analysis.CostWall, CostFactor: 2, PBestBar: 0.8},
		Trials: trials, Sequential: &seq}
	rep, err := analysis.Analyse(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	pr := rep.Pairs[0]
	if pr.Sequential == nil || pr.P != seq.Look.Pairs[0].P || pr.Interval.Method != analysis.ConfidenceSeq || !strings.Contains(pr.Test, "anytime") {
		t.Fatalf("pair %+v does not carry the sequential test", pr)
	}
	if !strings.HasPrefix(rep.Decision.Trace[0], "stopped early at check 1") {
		t.Fatalf("decision trace %q has no early-stop clause first", rep.Decision.Trace)
	}
	if pr.MissingTasks != 0 {
		t.Fatalf("%d missing pairs after an early stop, want 0 (not run is not missing)", pr.MissingTasks)
	}
	data := report.Data{Study: "stop-test", Stop: &report.Stop{Method: "anytime", Stopped: true, Check: 1, Reason: seq.Look.Reason, NotRun: len(seq.NotRun)}}
	sp := report.StopPair{JobKind: "jk", Challenger: "cand", Baseline: "inc", Status: "crossed", Tasks: 8, Planned: 40, P: float64(pr.P), PHolm: float64(pr.P), CSLevel: 0.95, Statistic: "e-value"}
	for _, pt := range seq.Look.Pairs[0].Path {
		b := float64(pt.Boundary)
		sp.Path = append(sp.Path, report.StopPoint{Tasks: pt.Tasks, Look: pt.Look, Statistic: pt.Statistic, Boundary: &b, Status: string(pt.Status)})
	}
	data.Stop.Pairs = []report.StopPair{sp}
	var h, md, js bytes.Buffer
	if err := report.WriteHTML(&h, data); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteMarkdown(&md, data); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&js, data); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), `id="fig-stop-1"`) || !strings.Contains(h.String(), "Stopped early at check 1") {
		t.Fatal("the HTML report has no stopping figure or stop line")
	}
	if !strings.Contains(md.String(), "## Early stopping") || !strings.Contains(md.String(), "| 1 | 8 | true |") {
		t.Fatalf("the Markdown report lacks the stop:\n%s", md.String())
	}
	if !strings.Contains(js.String(), `"not_run": 64`) && !strings.Contains(js.String(), `"not_run":64`) {
		t.Fatal("the JSON report lacks the stop")
	}
}

// On the real llama-server and models, an execution of a design with a
// stopping rule checks it after its one block and stores the look: two
// tasks cannot settle anything, so it runs to the end as done, the audit
// line names the rule's last check, and the stored look says the plan ended.
func TestRunnerChecksTheStoppingRuleOnARealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real llama-server (drop -short to run it)")
	}
	in, err := provision.Load()
	if err != nil {
		t.Skipf("needs rig's provisioned runtimes and models (run: make setup): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, snap, d, dir := freezeDemoSlice(t, ctx, in, func(m map[string]any) {
		m["name"] = "runner-stopping"
		m["stopping"] = map[string]any{"method": "anytime"}
	})
	if StoppingRule(d) == nil {
		t.Fatal("the frozen design lost its stopping rule")
	}
	st, exec := frozenExecution(t, ctx, dir, d, snap, "frozen for the stopping test")
	var why string
	h := runToEnd(t, ctx, env, Spec{Study: d.Name, Snapshot: snap, Store: st, Exec: exec, Dir: filepath.Join(dir, "executions", exec.ID),
		Ended: func(_ context.Context, _, w string) { why = w }})
	if info := h.Info(); info.Status != string(receipts.Done) || info.Error != "" {
		t.Fatalf("execution ended %s (%s)", info.Status, info.Error)
	}
	raw, found, err := st.Stop(ctx, exec.ID)
	if err != nil || !found {
		t.Fatalf("no stored look (%v)", err)
	}
	var seq analysis.Sequential
	if err := json.Unmarshal(raw, &seq); err != nil {
		t.Fatal(err)
	}
	if seq.StoppedEarly || !seq.Look.End || len(seq.Look.Pairs) != 1 || seq.Look.Pairs[0].Tasks != 2 || !strings.Contains(why, "stopping rule at check 1") {
		t.Fatalf("stored look %+v; audit line %q", seq.Look, why)
	}
}
