package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

func keyTask(grader, key string) Task {
	return Task{ID: "t", Key: json.RawMessage(key), Grader: GraderRef{Name: grader, Version: 1}, Input: Input{Prompt: "p"}}
}

func TestGraders(t *testing.T) {
	jsonKey := `{"fields":{"name":"Liam Ortiz","total":1250.5,"items":["desk lamp","USB hub"],"remote":true},"schema":{"required":["name","total"],"properties":{"total":{"type":"number"}}}}`
	tests := []struct {
		name      string
		grader    string
		key       string
		out       string
		wantPass  bool
		wantScore float64
	}{
		{"exact hit", "exact", `{"answer":"Paris"}`, " Paris\n", true, 1},
		{"exact case miss", "exact", `{"answer":"Paris"}`, "paris", false, 0},
		{"exact accept", "exact", `{"answer":"Paris","accept":["Paris, France"]}`, "Paris, France", true, 1},
		{"normalized case punct", "normalized", `{"answer":"Paris"}`, "  paris.  ", true, 1},
		{"normalized miss", "normalized", `{"answer":"Paris"}`, "Lyon", false, 0},
		{"regex hit", "regex", `{"pattern":"^INV-\\d{4}$","example":"INV-1234"}`, "INV-2291", true, 1},
		{"regex miss", "regex", `{"pattern":"^INV-\\d{4}$","example":"INV-1234"}`, "INV-22", false, 0},
		{"numeric last number", "numeric", `{"value":42,"tolerance":0.5}`, "Let me think: 40 + 2 = 42.2", true, 1},
		{"numeric thousands", "numeric", `{"value":1250}`, "Total: 1,250", true, 1},
		{"numeric out of tolerance", "numeric", `{"value":42,"tolerance":0.1}`, "43", false, 0},
		{"numeric no number", "numeric", `{"value":42}`, "forty-two", false, 0},
		{"json fenced all", "json", jsonKey, "Sure!\n```json\n{\"name\": \"liam ortiz\", \"total\": 1250.50, \"items\": [\"USB hub\", \"desk lamp\"], \"remote\": true}\n```", true, 1},
		{"json half", "json", jsonKey, `{"name": "Liam Ortiz", "total": 1250.5, "items": ["x"], "remote": false}`, false, 0.5},
		{"json schema type fails", "json", jsonKey, `{"name": "Liam Ortiz", "total": "1,250.50", "items": ["desk lamp","USB hub"], "remote": "yes"}`, false, 1},
		{"json key spelled loosely", "json", jsonKey, `{"Name": "Liam Ortiz", "total": 1250.5, "Items": ["desk lamp","USB hub"], "remote": true}`, true, 1},
		{"json skips bad braces", "json", jsonKey, `{not json} then {"name":"Liam Ortiz","total":1250.5,"items":["desk lamp","USB hub"],"remote":true}`, true, 1},
		{"json none", "json", jsonKey, "I cannot help with that", false, 0},
	}
	reg := DefaultRegistry(nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := keyTask(tc.grader, tc.key)
			g, err := reg.Grade(context.Background(), task, Output{TrialID: "r1", Text: tc.out})
			if err != nil {
				t.Fatal(err)
			}
			if g.Pass != tc.wantPass || g.Score != tc.wantScore {
				t.Errorf("pass=%v score=%v, want pass=%v score=%v (details %v)", g.Pass, g.Score, tc.wantPass, tc.wantScore, g.Details)
			}
			if g.Grader != tc.grader || g.Version != 1 || g.TrialID != "r1" {
				t.Errorf("grade not stamped: %+v", g)
			}
		})
	}
}

func TestGraderKeysPassThemselves(t *testing.T) {
	reg := DefaultRegistry(nil)
	for _, tc := range []struct{ grader, key string }{
		{"exact", `{"answer":"x"}`},
		{"normalized", `{"answer":"Hello, World"}`},
		{"regex", `{"pattern":"\\d+","example":"7"}`},
		{"numeric", `{"value":0.1,"tolerance":0}`},
		{"json", `{"fields":{"a":[1,{"b":"c"}],"n":null}}`},
	} {
		if err := checkKey(context.Background(), reg, keyTask(tc.grader, tc.key)); err != nil {
			t.Errorf("%s: %v", tc.grader, err)
		}
	}
}

func TestGraderBadKeys(t *testing.T) {
	reg := DefaultRegistry(nil)
	for _, tc := range []struct{ grader, key string }{
		{"exact", `{"answer":""}`},
		{"exact", `{"answer":"x","extra":1}`},
		{"regex", `{"pattern":"(","example":"x"}`},
		{"numeric", `{"value":"abc"}`},
		{"json", `{"fields":{}}`},
		{"json", `{"fields":{"a":1},"schema":{"properties":{"a":{"type":"string"}}}}`},
		{"code", `{"files":{"a.py":""},"tests":["t.py"]}`},
	} {
		g, err := reg.Get(GraderRef{Name: tc.grader, Version: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.CheckKey(keyTask(tc.grader, tc.key)); err == nil {
			t.Errorf("%s key %s accepted", tc.grader, tc.key)
		}
	}
}

func TestUnknownGrader(t *testing.T) {
	reg := DefaultRegistry(nil)
	for _, ref := range []GraderRef{{"nope", 1}, {"json", 9}} {
		_, err := reg.Get(ref)
		var ue *UnknownGraderError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnknownGrader) {
			t.Fatalf("%v: err = %v", ref, err)
		}
		if ue.Name != ref.Name || len(ue.Known) == 0 {
			t.Errorf("error does not name the grader or list known ones: %v", err)
		}
	}
	// Validate names the file and line.
	b := mustParse(t, testHeader+"\n"+testTask("a")+"\n"+
		`{"id":"b","job_kind":"qa","template_id":"t1","difficulty":"easy","input":{"prompt":"p"},"key":{"answer":"4"},"grader":{"name":"exact","version":7},"holdout":false,"source":"private"}`)
	err := reg.Validate(b)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 || pe.Field != "grader" || !errors.Is(err, ErrUnknownGrader) {
		t.Errorf("Validate = %v, want line 3 grader error", err)
	}
}

// stricterExact is a fake second version: it no longer trims space.
type stricterExact struct{ Exact }

func (stricterExact) Version() int { return 2 }
func (stricterExact) Grade(_ context.Context, t Task, out Output) (Grade, error) {
	k, err := readAnswerKey(t)
	if err != nil {
		return Grade{}, err
	}
	if out.Text == k.Answer {
		return Grade{Score: 1, Pass: true}, nil
	}
	return Grade{}, nil
}

func TestRegrade(t *testing.T) {
	reg := DefaultRegistry(nil)
	reg.Register(stricterExact{})
	task := keyTask("exact", `{"answer":"4"}`)
	out := Output{TrialID: "r", Text: "4\n"}
	old, err := reg.Grade(context.Background(), task, out)
	if err != nil {
		t.Fatal(err)
	}
	nu, err := reg.Regrade(context.Background(), task, out, 2)
	if err != nil {
		t.Fatal(err)
	}
	if old.Version != 1 || nu.Version != 2 {
		t.Errorf("versions %d, %d", old.Version, nu.Version)
	}
	if old.Pass == nu.Pass {
		t.Errorf("v1 and v2 agree (%v); the fake v2 should differ on trailing space", old.Pass)
	}
	if _, err := reg.Regrade(context.Background(), task, out, 3); !errors.Is(err, ErrUnknownGrader) {
		t.Errorf("regrade with missing version: %v", err)
	}
	latest, err := reg.Latest("exact")
	if err != nil || latest.Version() != 2 {
		t.Errorf("Latest = %v, %v", latest, err)
	}
}

func mustParse(t *testing.T, text string) *Bank {
	t.Helper()
	b, err := ParseBank(stringsReader(text), "bank.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
