package studies_test

// Tests of a judged design that use studytest's fixtures: an external test
// package, since studytest imports studies.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rig/studies"
	"rig/studies/studytest"
)

func TestValidateJudgedJobKind(t *testing.T) {
	if err := studies.Validate(context.Background(), studytest.WithJudge(t), studies.ValidateOptions{}); err != nil {
		t.Fatalf("judged design does not validate:\n%v", err)
	}
	tests := []struct {
		name string
		edit func(d *studies.Design)
		kind studies.ProblemKind
		path string
		msg  string
	}{
		{"no judge named", func(d *studies.Design) { d.JobKinds[0].Judge = "" }, studies.KindMissing, "job_kinds[0].judge", `role "judge"`},
		{"unknown judge", func(d *studies.Design) { d.JobKinds[0].Judge = "nobody" }, studies.KindUnknownRef, "job_kinds[0].judge", "not an arm"},
		{"judge is a candidate", func(d *studies.Design) { d.JobKinds[0].Judge = "smollm2-q8-ollama" }, studies.KindInvalid, "job_kinds[0].judge", `has role "candidate"`},
		{"judge without judge grader", func(d *studies.Design) { d.JobKinds[0].Grader = studies.Grader{Name: "json", Version: 1} }, studies.KindInvalid, "job_kinds[0].judge", "remove judge"},
		{"unknown judge version", func(d *studies.Design) { d.JobKinds[0].Grader.Version = 2 }, studies.KindInvalid, "job_kinds[0].grader.version", "at version 1"},
		{"judge through aider", func(d *studies.Design) { d.Arms[len(d.Arms)-1].Runtime = "aider+llama-server" }, studies.KindInvalid, "job_kinds[0].judge", "answers in its runtime"},
		{"judging repositories", func(d *studies.Design) {
			d.JobKinds[1].Grader, d.JobKinds[1].Judge = studies.Grader{Name: studies.JudgeGrader, Version: 1}, "judge-1"
		}, studies.KindInvalid, "job_kinds[1].grader.name", "code"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := studytest.WithJudge(t)
			tc.edit(d)
			err := studies.Validate(context.Background(), d, studies.ValidateOptions{})
			var ve *studies.ValidationError
			if !errors.As(err, &ve) || !ve.Has(tc.kind, tc.path) {
				t.Fatalf("err = %v, want %s at %s", err, tc.kind, tc.path)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want it to say %q", err, tc.msg)
			}
		})
	}
}

// A judged job kind prices the judge's calls: one per task and repeat.
func TestDryRunPricesTheJudge(t *testing.T) {
	d := studytest.WithJudge(t)
	p, err := studies.NewPlan(d, studies.DemoTasks(10, 4), studies.PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	speeds := studies.DemoSpeeds()
	if _, err := studies.DryRun(d, p, speeds, nil); !errors.Is(err, studies.ErrNoSpeed) || !strings.Contains(err.Error(), "judge-1") {
		t.Fatalf("a judge without a speed must be named as unpriced, got %v", err)
	}
	speeds["judge-1"] = studies.Speed{GenTokensPerSec: 50, PromptTokensPerSec: 500, LoadSeconds: 2, Watts: 100, Source: studies.SourceMeasured}
	e, err := studies.DryRun(d, p, speeds, nil)
	if err != nil {
		t.Fatal(err)
	}
	var judge studies.ArmCost
	for _, c := range e.Arms {
		if c.Arm == "judge-1" {
			judge = c
		}
	}
	// One call per task and repeat of the judged job kind, after one load.
	want := 10 * d.Repeats
	if judge.Trials != want || judge.Loads != 1 || judge.WallTime <= 2*time.Second {
		t.Errorf("judge priced %+v, want %d calls and one load", judge, want)
	}
}
