package receipts

import (
	"context"
	"errors"
	"testing"
	"time"
)

func gradeOf(r Receipt, grader, version string, score float64) GradeRecord {
	return GradeRecord{ExecutionID: r.ExecutionID, Arm: r.Arm, JobKind: r.JobKind, TaskID: r.TaskID, Repeat: r.Repeat,
		Attempt: r.Attempt, Grader: grader, GraderVersion: version, Score: score, Pass: score >= 0.5,
		GradedAt: time.Date(2026, 11, 30, 6, 0, 0, 0, time.FixedZone("X", 3600))}
}

func TestPutGradesBesideReceipts(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	r1, r2 := sample("a", "t1", 0, 1, Scored), sample("b", "t1", 0, 1, Scored)
	for _, r := range []Receipt{r1, r2} {
		if err := s.PutReceipt(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if gs, err := s.Grades(ctx, "e1"); err != nil || len(gs) != 0 {
		t.Fatalf("grades before any = %v, %v", gs, err)
	}
	v1 := []GradeRecord{gradeOf(r1, "judge:j", "1", 0.8), gradeOf(r2, "judge:j", "1", 0.2)}
	if err := s.PutGrades(ctx, v1); err != nil {
		t.Fatal(err)
	}
	// The same grades again (a resumed judge phase) are a no-op.
	if err := s.PutGrades(ctx, v1); err != nil {
		t.Errorf("same grades again: %v", err)
	}
	// A different score under the same grader version is refused.
	changed := v1[0]
	changed.Score = 0.1
	if err := s.PutGrades(ctx, []GradeRecord{changed}); !errors.Is(err, ErrConflict) {
		t.Errorf("changed grade = %v, want ErrConflict", err)
	}
	// A newer version is stored beside the old one.
	if err := s.PutGrades(ctx, []GradeRecord{gradeOf(r1, "judge:j", "2", 0.4)}); err != nil {
		t.Fatal(err)
	}
	by, err := s.GradesBy(ctx, "e1", "judge:j", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(by[r1.Trial()]); n != 2 {
		t.Errorf("arm a has %d grades, want the old and the new", n)
	}
	v1only, _ := s.GradesBy(ctx, "e1", "judge:j", "1")
	if g := v1only[r1.Trial()]; len(g) != 1 || g[0].Score != 0.8 {
		t.Errorf("version 1 of arm a = %+v, want the old 0.8 untouched", g)
	}
	// The receipt itself is unchanged.
	got, err := s.Receipt(ctx, "e1", r1.Trial(), 1)
	if err != nil || got.Grade.Grader != "exact-json" {
		t.Errorf("receipt grade = %+v, %v", got.Grade, err)
	}
}

func TestPutGradesAllOrNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	r := sample("a", "t1", 0, 1, Scored)
	pre := sample("a", "t2", 0, 1, Preempted)
	for _, x := range []Receipt{r, pre} {
		if err := s.PutReceipt(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		bad   GradeRecord
		field string
	}{
		{"no such receipt", gradeOf(sample("zz", "t1", 0, 1, Scored), "json", "2", 1), "attempt"},
		{"preempted receipt", gradeOf(pre, "json", "2", 1), "attempt"},
		{"score out of range", gradeOf(r, "json", "3", 1.5), "score"},
		{"no version", gradeOf(r, "json", "", 1), "grader_version"},
		{"other job kind", func() GradeRecord { g := gradeOf(r, "json", "4", 1); g.JobKind = "fix-test"; return g }(), "job_kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			good := gradeOf(r, "json", "9", 1)
			err := s.PutGrades(ctx, []GradeRecord{good, tc.bad})
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err = %v, want a FieldError on %s", err, tc.field)
			}
			if gs, _ := s.Grades(ctx, ""); len(gs) != 0 {
				t.Errorf("%d grades written beside a refused one, want none", len(gs))
			}
		})
	}
}
