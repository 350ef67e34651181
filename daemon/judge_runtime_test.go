package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"rig/internal/testenv"
	"strconv"
	"strings"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/runtimes"
	"rig/studies"
	"rig/studies/studytest"
	"rig/tasks"
)

// fakeGates lets every counted run start and never preempts: the governor
// is tested on its own, and this test is about grading.
type fakeGates struct{}

func (fakeGates) Ready(context.Context) error { return nil }
func (fakeGates) Watch(context.Context, string, *runtimes.Sandbox, uint64) (run.TrialGuard, error) {
	return fakeGuard{preempted: make(chan struct{})}, nil
}

type fakeGuard struct{ preempted chan struct{} }

func (g fakeGuard) Preempted() <-chan struct{} { return g.preempted }
func (fakeGuard) End() string                  { return "" }

// judgedStudyDesign writes studytest.JudgedStudyDesign to a design file: a
// study of extract-json (three tasks) run by SmolLM2 and Gemma 3 on
// llama-server and graded blind by a SmolLM2 judge arm on llama-server.
func judgedStudyDesign(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "design.json")
	if err := os.WriteFile(path, studytest.JudgedStudyDesign(t, name), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestJudgeGradesBlindOnRealRuntime runs a small judged study end to end on
// llama-server with real models: two arms answer three tasks, then a judge
// arm grades each task's two outputs under random labels.
func TestJudgeGradesBlindOnRealRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts llama-server three times with real models (run without -short)")
	}
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (register fingerprints them)", err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	svc.Gates = fakeGates{}
	const name = "judged"
	steps := []func() error{
		func() error {
			_, err := svc.Studies().Register(ctx, RegisterRequest{DesignFile: judgedStudyDesign(t, name), Actor: "test"})
			return err
		},
		func() error {
			_, err := svc.Studies().Review(ctx, name, studies.Review{Reviewer: "outside", Verdict: "pass", LicenceLine: "licences: smollm2-135m-instruct (Apache-2.0) and the rest checked; all items allowed for evaluation"}, "")
			return err
		},
		func() error { _, err := svc.Studies().Approve(ctx, name, "director", "read"); return err },
		func() error { _, err := svc.Studies().Freeze(ctx, name, "test"); return err },
		func() error { _, err := svc.Studies().Preflight(ctx, name, os.Stderr); return err },
		func() error { _, err := svc.Studies().Validate(ctx, name, os.Stderr); return err },
		func() error {
			_, err := svc.Executions().Run(ctx, RunRequest{Study: name, Key: "run-1", Actor: "test"})
			return err
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
	}
	info, err := svc.Executions().Wait(ctx, name)
	if err != nil || info.Status != string(receipts.Done) {
		t.Fatalf("execution ended %s: %v %s", info.Status, err, info.Error)
	}
	snap, _ := svc.Snapshot(name)
	d, _ := studies.ParseDesign("snapshot", snap.Design)
	st, _ := svc.store(name)
	dir := info.Records

	// The identities of the judged arms, which the judge must never see
	// (that they name every judged arm and model is tested in run).
	ids := run.JudgeIdentities(d, snap, d.JobKinds[0])

	// The judge's calls are in its own generation record, role judge, and
	// what it was shown names no judged arm or model.
	_, rows, err := genrecord.ReadAll(filepath.Join(dir, "generations-judge-1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("judge record holds %d rows, want one per task (3)", len(rows))
	}
	rendered := map[string]string{}
	for _, r := range rows {
		if r.Role != genrecord.RoleJudge || r.Arm != "judge-1" || r.RenderedPrompt == "" {
			t.Errorf("judge row %s: role %q arm %q, rendered prompt %d bytes", r.RowID, r.Role, r.Arm, len(r.RenderedPrompt))
		}
		if err := tasks.AssertNoIdentity(r.RenderedPrompt, ids); err != nil {
			t.Errorf("judge row %s is not blind: %v\n%s", r.RowID, err, r.RenderedPrompt)
		}
		low := strings.ToLower(r.RenderedPrompt)
		for _, word := range []string{"smollm", "gemma", "llama-server"} {
			if strings.Contains(low, word) {
				t.Errorf("judge row %s names %q", r.RowID, word)
			}
		}
		rendered[r.RowID] = r.RenderedPrompt
	}

	// Every counted trial has one judge grade, and its label joins back to
	// the trial whose output stood under that label in the judge's prompt.
	var blinding map[string]run.BlindingRecord
	if err := atomicfile.ReadJSON(filepath.Join(dir, "blinding-judge-1.json"), &blinding); err != nil {
		t.Fatal(err)
	}
	texts, err := run.RecordTexts(dir)
	if err != nil {
		t.Fatal(err)
	}
	counted, _ := st.Counted(ctx, info.ID)
	grades, err := st.GradesBy(ctx, info.ID, "judge:judge-1", "1")
	if err != nil {
		t.Fatal(err)
	}
	if len(counted) != 6 || len(grades) != 6 {
		t.Fatalf("%d counted trials, %d judged; want 6 and 6", len(counted), len(grades))
	}
	for k, r := range counted {
		gs := grades[k]
		if len(gs) != 1 {
			t.Errorf("trial %s has %d judge grades, want 1", k, len(gs))
			continue
		}
		g := gs[0]
		b := blinding[r.JobKind+"|"+r.TaskID+"|"+strconv.Itoa(r.Repeat)]
		e, ok := b.Map.Lookup(g.Label)
		if !ok || e.Arm != r.Arm || e.TrialID != run.TrialCallID(r) || g.Call != b.Call {
			t.Errorf("trial %s: label %s joins to %+v (call %s vs %s)", k, g.Label, e, g.Call, b.Call)
		}
		shown := "### " + g.Label + "\n" + strings.TrimSpace(tasks.Redact(texts[run.TrialCallID(r)], ids))
		if !strings.Contains(rendered[g.Call], shown) {
			t.Errorf("trial %s: the judge's prompt does not show its output under %s", k, g.Label)
		}
		t.Logf("%-22s %-16s label %s  judge score %.1f pass=%v  (json grader: %.2f)", r.Arm, r.TaskID, g.Label, g.Score, g.Pass, r.Grade.Score)
	}

	// The analysis ranks on the judge's grades, and knows which judge gave them.
	a, err := svc.Reports().Analyse(ctx, name, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range a.Input.Trials {
		g := grades[receipts.TrialKey{Arm: tr.Arm, TaskID: tr.Task, Repeat: tr.Repeat}]
		if tr.Missing || len(g) != 1 || tr.Score != g[0].Score || tr.Pass != g[0].Pass {
			t.Errorf("analysis trial %s/%s scored %v/%v, judge gave %+v", tr.Arm, tr.Task, tr.Score, tr.Pass, g)
		}
	}
	for _, arm := range a.Input.Design.Arms {
		if arm.Name != "judge-1" && !strings.HasPrefix(arm.JudgeID, "judge:judge-1@v1/") {
			t.Errorf("arm %s judge id %q", arm.Name, arm.JudgeID)
		}
	}

	// A resumed execution finds every task graded: no call, no new grade.
	// The stored execution runs again through the runner, as the daemon
	// starts it (see start; the design has no auto wall to derive).
	env, err := svc.runEnv()
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.Execution(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := run.Start(env, run.Spec{Study: name, Snapshot: snap, Store: st, Exec: e, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		h.Cancel()
		t.Fatalf("the resumed execution did not end: %v", ctx.Err())
	}
	if again := h.Info(); again.Error != "" || again.Status != string(receipts.Done) {
		t.Fatalf("the resumed execution ended %s: %s", again.Status, again.Error)
	}
	if _, again, _ := genrecord.ReadAll(filepath.Join(dir, "generations-judge-1.jsonl")); len(again) != 3 {
		t.Errorf("judge record holds %d rows after a second judge phase, want still 3", len(again))
	}
	if all, _ := st.Grades(ctx, info.ID); len(all) != 6 {
		t.Errorf("%d grades after a second judge phase, want still 6", len(all))
	}
}
