package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rig/api"
	"rig/genrecord"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/studies/studytest"
)

// A try is blocked by the licence check as register is: an item the
// registry has no entry for stops it before any runtime starts, naming the
// item and the file; a task that is hold-out or absent cannot be tried.
func TestTryIsBlockedLikeRegister(t *testing.T) {
	_, err := provision.Load()
	testenv.NeedsSetup(t, "a provisioned machine (installed.env)", err)
	svc, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	var d map[string]any
	if err := json.Unmarshal(studytest.ReadDemo(t), &d); err != nil {
		t.Fatal(err)
	}
	d["items"] = append(d["items"].([]any), map[string]any{"role": "dataset", "name": "a bank nobody read the licence of", "registry_id": "no-such-entry", "use": "evaluation"})
	raw, _ := json.Marshal(d)
	file := filepath.Join(studytest.Root(t), "examples", "demo-study", "design.json")
	_, err = svc.Tries().Try(context.Background(), api.TryRequest{DesignFile: file, Design: raw})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "items") || !strings.Contains(err.Error(), "no-such-entry") || !strings.Contains(err.Error(), "design.json") {
		t.Errorf("a try of a design with an unregistered item = %v; want the licence check's refusal naming it", err)
	}
	if svc.tryPool != nil && svc.tryPool.Parked() != 0 {
		t.Error("a refused try left a runtime")
	}
	if recs, err := svc.Tries().List(); err != nil || len(recs) != 0 {
		t.Errorf("a refused try was kept: %v %v", recs, err)
	}
}

// Prune needs to be told what to remove, and an id from outside is checked
// before it becomes a path.
func TestTryPruneRefusesVagueAndForeign(t *testing.T) {
	svc, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := svc.Tries().Prune(api.TryPruneRequest{}, time.Now()); err == nil {
		t.Error("prune with nothing named was not refused")
	}
	if _, err := svc.Tries().Prune(api.TryPruneRequest{ID: "../studies"}, time.Now()); err == nil || !strings.Contains(err.Error(), "try id") {
		t.Errorf("prune of a path-like id = %v; want the id refused", err)
	}
}

// A try of a job kind graded by a judge arm grades it as a study does: the
// arms answer on real llama-servers, then the judge arm (a third one)
// grades each task's answers blind; every trial carries the judge's grade,
// the judge's call is in the try's own generation record and the blinding
// key beside it, and nothing ends as an error.
func TestTryGradesJudgedJobKindByTheJudge(t *testing.T) {
	testenv.Long(t, "a try on three real llama-servers: two arms and their judge")
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes and models", err)
	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	svc.Gates = fakeGates{} // the governor is tested on its own
	file := judgedStudyDesign(t, "judged-try")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rec, err := svc.Tries().Try(ctx, api.TryRequest{DesignFile: file, Design: raw, Tasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Trials) != 4 || slices.Contains(rec.Arms, "judge-1") {
		t.Fatalf("the try ran %d trials on arms %v; want 2 tasks by the 2 arms, the judge not among them", len(rec.Trials), rec.Arms)
	}
	for _, tr := range rec.Trials {
		t.Logf("%s × %s: %s graded=%v pass=%v score=%.2f by %q; %q", tr.Task, tr.Arm, tr.Outcome, tr.Graded, tr.Pass, tr.Score, tr.Grader, tr.Detail)
		if tr.Outcome == "error" || !tr.Graded || tr.Grader != "judge:judge-1" {
			t.Errorf("trial %s × %s: outcome %s, graded %v by %q (%s); want the judge's grade", tr.Task, tr.Arm, tr.Outcome, tr.Graded, tr.Grader, tr.Detail)
		}
	}
	_, rows, err := genrecord.ReadAll(layout.Records(rec.Dir).Generation("judge-1"))
	if err != nil || len(rows) != 2 {
		t.Errorf("the judge's generation record in the try: %d rows, %v; want one call per task (2)", len(rows), err)
	}
	if _, err := os.Stat(layout.Records(rec.Dir).Blinding("judge-1")); err != nil {
		t.Errorf("the blinding key is not kept with the try: %v", err)
	}
}
