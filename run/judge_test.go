package run

import (
	"context"
	"errors"
	"strings"
	"testing"

	"rig/receipts"
	"rig/studies"
	"rig/studies/studytest"
	"rig/tasks"
)

func TestParseJudgeAnswer(t *testing.T) {
	labels := []string{"item-aaaaaa", "item-bbbbbb"}
	tests := []struct {
		name string
		text string
		want map[string]float64
		err  bool
	}{
		{"grammar form", "{\"label\": \"item-aaaaaa\", \"score\": 0.7}\n{\"label\": \"item-bbbbbb\", \"score\": 1}\n",
			map[string]float64{"item-aaaaaa": 0.7, "item-bbbbbb": 1}, false},
		{"prose around, first score counts", `Here: {"label":"item-bbbbbb","score":0} then {"label":"item-aaaaaa","score":0.5} {"label":"item-bbbbbb","score":1}`,
			map[string]float64{"item-aaaaaa": 0.5, "item-bbbbbb": 0}, false},
		{"a label missing", `{"label": "item-aaaaaa", "score": 0.2}`, nil, true},
		{"score out of range", `{"label": "item-aaaaaa", "score": 3} {"label": "item-bbbbbb", "score": 1}`, nil, true},
		{"unknown labels ignored", `{"label": "item-cccccc", "score": 1}`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseJudgeAnswer(tc.text, labels)
			if tc.err {
				if !errors.Is(err, ErrJudgeAnswer) {
					t.Fatalf("err = %v, want ErrJudgeAnswer", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for l, w := range tc.want {
				if got[l] != w {
					t.Errorf("%s = %v, want %v", l, got[l], w)
				}
			}
		})
	}
}

func TestJudgeGrammarHoldsEveryLabel(t *testing.T) {
	g := judgeGrammar([]string{"item-000001", "item-00000f"})
	for _, want := range []string{`"{\"label\": \"item-000001\", \"score\": " score`, `"{\"label\": \"item-00000f\", \"score\": " score`, `score ::= "0" | "0." [0-9] | "1"`} {
		if !strings.Contains(g, want) {
			t.Errorf("grammar lacks %s:\n%s", want, g)
		}
	}
}

// An arm named like a word of the judge's instructions cannot be hidden by
// redacting outputs: the prompt is refused before any runtime is touched.
func TestJudgePromptNamingAnArmIsRefused(t *testing.T) {
	d := studytest.WithJudge(t)
	d.Arms[0].Name = "answer"
	bank := &tasks.Bank{File: "b.jsonl", Tasks: []tasks.Task{{ID: "t1", JobKind: "extract-json", Input: tasks.Input{Prompt: "Say hi."},
		Grader: tasks.GraderRef{Name: "exact", Version: 1}, Key: []byte(`{"answer":"hi"}`)}}}
	x := &execution{trialRunner: &trialRunner{design: d, snap: &studies.Snapshot{Hash: "h"}, exec: receipts.Execution{ID: "exec-1"}, banks: map[string]*tasks.Bank{"extract-json": bank},
		graders: tasks.DefaultRegistry(nil)}}
	g := judgeGroup{task: "t1", repeat: 1, recs: []receipts.Receipt{
		{Arm: "answer", JobKind: "extract-json", TaskID: "t1", Repeat: 1, Attempt: 1, ModelName: "SmolLM2-135M-Instruct"},
		{Arm: "gemma3-ollama", JobKind: "extract-json", TaskID: "t1", Repeat: 1, Attempt: 1, ModelName: "Gemma-3-270M"},
	}}
	texts := map[string]string{"answer/extract-json/t1/1#1": "hi from SmolLM2", "gemma3-ollama/extract-json/t1/1#1": "hi, I am Gemma"}
	_, err := x.judgeTask(context.Background(), d.JobKinds[0], *d.Arm("judge-1"), nil, g, texts, x.identities(d.JobKinds[0]), map[string]BlindingRecord{})
	var ie *tasks.IdentityError
	if !errors.As(err, &ie) || ie.Identity != "answer" {
		t.Fatalf("err = %v, want an IdentityError naming \"answer\"", err)
	}
}

// A judge phase cut short (daemon killed) leaves some tasks graded; the
// resumed phase picks up only the others.
func TestJudgePendingSkipsGradedTasks(t *testing.T) {
	ctx := context.Background()
	in := studytest.StoredExecution(t, TrialCallID)
	x := &execution{trialRunner: &trialRunner{exec: receipts.Execution{ID: in.Exec}}, store: in.Store}
	jk := studies.JobKind{Name: "qa", Grader: studies.Grader{Name: studies.JudgeGrader, Version: studies.JudgeGraderVersion}, Judge: "judge-1"}
	pending, err := x.pendingGroups(ctx, jk, studies.JudgeName("judge-1"), "1")
	if err != nil || len(pending) != 2 || len(pending[0].recs) != 2 {
		t.Fatalf("before grading: %d groups (%v), want 2 tasks of 2 arms", len(pending), err)
	}
	var grades []receipts.GradeRecord
	for _, r := range pending[0].recs {
		grades = append(grades, receipts.GradeRecord{ExecutionID: in.Exec, Arm: r.Arm, JobKind: r.JobKind, TaskID: r.TaskID, Repeat: r.Repeat,
			Attempt: r.Attempt, Grader: studies.JudgeName("judge-1"), GraderVersion: "1", Score: 1, Pass: true, Label: "item-" + r.Arm, GradedAt: in.Now()})
	}
	if err := in.Store.PutGrades(ctx, grades); err != nil {
		t.Fatal(err)
	}
	pending, err = x.pendingGroups(ctx, jk, studies.JudgeName("judge-1"), "1")
	if err != nil || len(pending) != 1 || pending[0].task != "sum" {
		t.Fatalf("after grading %q: pending %+v, %v; want only \"sum\"", "capital", pending, err)
	}
	// Another judge (or version) has graded nothing.
	if other, _ := x.pendingGroups(ctx, jk, studies.JudgeName("judge-2"), "1"); len(other) != 2 {
		t.Errorf("judge-2 pending %d tasks, want 2", len(other))
	}
}

// The identities of the judged arms, which the judge must never see: their
// arm and model names, the models' registry ids, and the frozen models'
// files.
func TestJudgeIdentitiesNameEveryJudgedArm(t *testing.T) {
	d, err := studies.ParseDesign("design.json", studytest.JudgedStudyDesign(t, "judged"))
	if err != nil {
		t.Fatal(err)
	}
	snap := &studies.Snapshot{Hash: "h", Arms: []studies.FrozenArm{
		{Name: "smollm2-llama-server", ModelPath: "/models/smollm2-135m-q4_1.gguf", ModelSHA256: strings.Repeat("a", 64)},
		{Name: "smollm2-q8-llama-server", ModelPath: "/models/smollm2-135m-q8_0.gguf", ModelSHA256: strings.Repeat("b", 64)},
	}}
	ids := (&execution{trialRunner: &trialRunner{design: d, snap: snap}}).identities(d.JobKinds[0])
	for _, must := range []string{"smollm2-llama-server", "smollm2-q8-llama-server", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct-Q8_0", "smollm2-135m-instruct-q8_0", "smollm2-135m-instruct"} {
		if !containsFold(ids, must) {
			t.Errorf("identities %q lack %q", ids, must)
		}
	}
	for _, fa := range snap.Arms {
		if !containsFold(ids, fa.ModelPath) || !containsFold(ids, fa.ModelSHA256) {
			t.Errorf("identities %q lack arm %s's frozen model %s (%s)", ids, fa.Name, fa.ModelPath, fa.ModelSHA256)
		}
	}
}

func containsFold(xs []string, s string) bool {
	for _, x := range xs {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
