package run

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
	"rig/studies/studytest"
	"rig/tasks"
)

// fakeExactV2 stands in for a newer version of the exact grader: it also
// accepts an answer that differs only in case.
type fakeExactV2 struct{ tasks.Exact }

func (fakeExactV2) Version() int { return 2 }

func (g fakeExactV2) Grade(ctx context.Context, t tasks.Task, out tasks.Output) (tasks.Grade, error) {
	var k struct {
		Answer string `json:"answer"`
	}
	if err := json.Unmarshal(t.Key, &k); err != nil {
		return tasks.Grade{}, err
	}
	if strings.EqualFold(strings.TrimSpace(out.Text), k.Answer) {
		return tasks.Grade{Score: 1, Pass: true}, nil
	}
	return tasks.Grade{}, nil
}

// regradeFixture is an execution of two arms on two exact-graded tasks, with
// their outputs in a generation record (studytest.StoredExecution): arm "a"
// answers "Paris" and "4", arm "b" answers "paris" and "5".
func regradeFixture(t *testing.T) (RegradeInput, *receipts.Store) {
	t.Helper()
	x := studytest.StoredExecution(t, TrialCallID)
	return RegradeInput{Store: x.Store, Exec: x.Exec, RecDir: x.Dir, Banks: map[string]*tasks.Bank{"qa": x.Bank},
		Registry: tasks.NewRegistry(tasks.Exact{}, fakeExactV2{}), Now: x.Now}, x.Store
}

func TestRegradeStoresNewVersionBesideOld(t *testing.T) {
	ctx := context.Background()
	in, st := regradeFixture(t)
	in.Grader, in.Version = "exact", 2
	rep, err := Regrade(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 || rep.Written != 4 {
		t.Fatalf("re-graded %d trials, wrote %d; want 4 and 4", len(rep.Rows), rep.Written)
	}
	// Only arm b's "paris" changes: v2 accepts case differences.
	if rep.Changed != 1 {
		t.Errorf("changed = %d, want 1", rep.Changed)
	}
	for _, row := range rep.Rows {
		wantChange := row.Arm == "b" && row.Task == "capital"
		if row.Changed != wantChange || row.NewGrader != "exact@v2" || row.OldGrader != "exact@v1" {
			t.Errorf("row %+v: changed=%v, want %v", row, row.Changed, wantChange)
		}
	}
	old, _ := st.GradesBy(ctx, "exec-1", "exact", "2")
	if len(old) != 4 {
		t.Errorf("%d trials hold an exact@v2 grade, want 4", len(old))
	}
	// The receipts keep their v1 grades.
	r, err := st.Receipt(ctx, "exec-1", receipts.TrialKey{Arm: "b", TaskID: "capital", Repeat: 1}, 1)
	if err != nil || r.Grade.GraderVersion != "1" || r.Grade.Pass {
		t.Errorf("receipt grade after re-grade = %+v, %v; want the v1 fail untouched", r.Grade, err)
	}
	// Running it again writes nothing new and reports the stored grades.
	again, err := Regrade(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if again.Written != 0 || again.Changed != 1 || !again.Rows[0].AlreadyHad {
		t.Errorf("second re-grade wrote %d, changed %d, rows %+v", again.Written, again.Changed, again.Rows[0])
	}
}

func TestRegradeRefusesWithNothingWritten(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		grader  string
		version int
		want    error
		msg     string
	}{
		{"unknown grader", "exactly", 0, tasks.ErrUnknownGrader, "exactly"},
		{"unknown version", "exact", 7, tasks.ErrUnknownGrader, "exact@v7"},
		{"same version", "exact", 1, nil, "already"},
		{"judge grades", "judge:j", 1, nil, "rerunning the study"},
		{"grader no task uses", "regex", 1, nil, "no trial to re-grade graded by regex"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, st := regradeFixture(t)
			in.Registry.Register(tasks.Regex{})
			in.Grader, in.Version = tc.grader, tc.version
			_, err := Regrade(ctx, in)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v naming %q", err, tc.want, tc.msg)
			}
			if gs, _ := st.Grades(ctx, ""); len(gs) != 0 {
				t.Errorf("%d grades written after a refusal, want none", len(gs))
			}
		})
	}
}

func TestRegradeRefusesCodeTrials(t *testing.T) {
	ctx := context.Background()
	in, st := regradeFixture(t)
	// An Aider trial of the same bank: its repository is not kept.
	putAiderTrial(t, st)
	in.Grader, in.Version = "exact", 2
	if _, err := Regrade(ctx, in); !errors.Is(err, ErrNotRegradable) {
		t.Fatalf("named grader over a code trial = %v, want ErrNotRegradable", err)
	}
	if gs, _ := st.Grades(ctx, ""); len(gs) != 0 {
		t.Errorf("%d grades written, want none", len(gs))
	}
	// Without --grader the code trial is skipped and said so.
	in.Grader = ""
	rep, err := Regrade(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 4 || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "predates kept repositories") {
		t.Errorf("wrote %d, skipped %q", rep.Written, rep.Skipped)
	}
}

func TestRegradeReadsAKeptRepository(t *testing.T) {
	ctx := context.Background()
	in, st := regradeFixture(t)
	r := putAiderTrial(t, st)
	if err := KeepRepo(layout.Records(in.RecDir), TrialCallID(r), map[string]string{"main.py": "print(1)\n"}); err != nil {
		t.Fatal(err)
	}
	in.Grader, in.Version = "exact", 2
	rep, err := Regrade(ctx, in)
	if err != nil {
		t.Fatalf("a code trial with its repository kept should re-grade: %v", err)
	}
	found := false
	for _, row := range rep.Rows {
		found = found || (row.Arm == "c" && row.Task == "sum")
	}
	if !found || len(rep.Skipped) != 0 {
		t.Errorf("code trial not re-graded from its kept repository: rows %+v skipped %q", rep.Rows, rep.Skipped)
	}
}

// putAiderTrial stores a scored Aider (code) trial of the fixture's bank.
func putAiderTrial(t *testing.T, st *receipts.Store) receipts.Receipt {
	t.Helper()
	r := receipts.Receipt{StudyID: "s1", ExecutionID: "exec-1", DesignHash: studytest.ExecutionHash, Arm: "c", JobKind: "qa", TaskID: "sum",
		Repeat: 1, Attempt: 1, Outcome: receipts.Scored, ModelName: "m", ModelDigest: strings.Repeat("a", 64), Runtime: "llama-server",
		Harness: "aider", HarnessVersion: "0.86.2", Pins: map[string]string{"quant": "Q4_1"}, Machine: "test",
		Grade: &receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "1"}, GenerationSHA256: genrecord.EmptySum}
	if err := st.PutReceipt(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}
