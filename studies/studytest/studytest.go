// Package studytest holds test fixtures for rig's tests, not for production:
// the bundled demo design, the demo with a judge arm, a judged study design
// and a small stored execution. Nothing outside a _test.go file imports it.
package studytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
	"rig/studies"
	"rig/tasks"
)

// Root is the module's root folder, found from this file's place in it, so
// the fixtures read the same files from every package's tests.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("studytest: cannot locate the module root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ReadDemo is the bundled demo study's design file.
func ReadDemo(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Root(t), "examples", "demo-study", "design.json"))
	if err != nil {
		t.Fatalf("read bundled example: %v", err)
	}
	return data
}

// DemoDesign is the bundled demo study's design, parsed.
func DemoDesign(t testing.TB) *studies.Design {
	t.Helper()
	d, err := studies.ParseDesign("design.json", ReadDemo(t))
	if err != nil {
		t.Fatalf("parse bundled example: %v", err)
	}
	return d
}

// WithJudge returns the demo design with a SmolLM2 judge arm on llama-server
// grading extract-json.
func WithJudge(t testing.TB) *studies.Design {
	t.Helper()
	d := DemoDesign(t)
	j := d.Arms[0]
	j.Name, j.Role, j.JobKinds = "judge-1", studies.RoleJudge, nil
	j.Pins.StopCap = 128
	d.Arms = append(d.Arms, j)
	d.JobKinds[0].Grader = studies.Grader{Name: studies.JudgeGrader, Version: studies.JudgeGraderVersion}
	d.JobKinds[0].Judge = "judge-1"
	return d
}

// JudgedStudyDesign is the design file of a study of the extract-json job
// kind (three tasks of the bundled bank) run by SmolLM2 at Q4_1 and at Q8_0
// on llama-server and graded blind by a SmolLM2 judge arm on llama-server.
func JudgedStudyDesign(t testing.TB, name string) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(ReadDemo(t), &d); err != nil {
		t.Fatal(err)
	}
	d["name"] = name
	// The design is written to a test's own folder and reads the bundled bank
	// where it is.
	d["allow_paths_outside"] = true
	bank, err := filepath.Abs(filepath.Join(Root(t), "tasks", "banks", "extract-json.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	jk := d["job_kinds"].([]any)[0].(map[string]any)
	jk["task_bank"], jk["sample_tasks"] = bank, 3
	jk["grader"] = map[string]any{"name": studies.JudgeGrader, "version": studies.JudgeGraderVersion}
	jk["judge"] = "judge-1"
	d["job_kinds"] = []any{jk}
	var arms []any
	var judge map[string]any
	for _, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		if am["runtime"] != "llama-server" {
			continue
		}
		arms = append(arms, am)
		if am["role"] == studies.RoleIncumbent {
			raw, _ := json.Marshal(am)
			if err := json.Unmarshal(raw, &judge); err != nil {
				t.Fatal(err)
			}
			judge["name"], judge["role"] = "judge-1", studies.RoleJudge
			delete(judge, "job_kinds")
			judge["pins"].(map[string]any)["stop_cap"] = 128
		}
	}
	d["arms"] = append(arms, judge)
	var items []any
	for _, it := range d["items"].([]any) {
		switch it.(map[string]any)["registry_id"] {
		case "aider-chat", "rig-bank-fix-test", "ollama":
		default:
			items = append(items, it)
		}
	}
	d["items"] = items
	d["power"].(map[string]any)["task_count"] = 3
	out, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ExecutionHash is the design hash of StoredExecution's study.
const ExecutionHash = "1111111111111111111111111111111111111111111111111111111111111111"

// Execution is a stored execution and what its trials read.
type Execution struct {
	Store *receipts.Store
	Exec  string // the execution's id
	Dir   string // its generation records
	Bank  *tasks.Bank
	Now   func() time.Time
}

// StoredExecution is an execution of two arms on two exact-graded tasks of
// job kind "qa", with their outputs in a generation record per arm: arm "a"
// answers "Paris" and "4", arm "b" answers "paris" and "5". callID names a
// trial's row in the generation record (run.TrialCallID; studytest cannot
// import the runner whose tests use it).
func StoredExecution(t testing.TB, callID func(receipts.Receipt) string) Execution {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := receipts.Open(layout.Records(dir).Store(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Transition(ctx, receipts.Transition{From: "", To: "approved", Who: "d", Why: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Freeze(ctx, ExecutionHash, receipts.Transition{From: "approved", To: "frozen", Who: "d", Why: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutExecution(ctx, receipts.Execution{ID: "exec-1", Attempt: 1, Status: receipts.Running, DesignHash: ExecutionHash}); err != nil {
		t.Fatal(err)
	}
	bank := &tasks.Bank{File: "capitals.jsonl", Tasks: []tasks.Task{
		{ID: "capital", JobKind: "qa", Grader: tasks.GraderRef{Name: "exact", Version: 1}, Key: json.RawMessage(`{"answer":"Paris"}`)},
		{ID: "sum", JobKind: "qa", Grader: tasks.GraderRef{Name: "exact", Version: 1}, Key: json.RawMessage(`{"answer":"4"}`)},
	}}
	answers := map[string]map[string]string{"a": {"capital": "Paris", "sum": "4"}, "b": {"capital": "paris", "sum": "5"}}
	pins := genrecord.Pins{ModelSHA256: strings.Repeat("a", 64), ModelName: "m", Runtime: "llama-server", RuntimeVersion: "b1",
		BinarySHA256: strings.Repeat("b", 64), Libraries: map[string]string{"libllama.so": strings.Repeat("c", 64)}, BuildFlags: "cpu", MachineLine: "test", DesignHash: ExecutionHash, StudyID: "s1", ExecutionID: "exec-1"}
	reg := tasks.NewRegistry(tasks.Exact{})
	for _, arm := range []string{"a", "b"} {
		w, err := genrecord.OpenWriter(layout.Records(dir).Generation(arm), pins)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range bank.Tasks {
			r := receipts.Receipt{StudyID: "s1", ExecutionID: "exec-1", DesignHash: ExecutionHash, Arm: arm, JobKind: "qa", TaskID: task.ID,
				Repeat: 1, Attempt: 1, Outcome: receipts.Scored, ModelName: "m", ModelDigest: strings.Repeat("a", 64),
				Runtime: "llama-server", Harness: "llama-server", HarnessVersion: "b1", Pins: map[string]string{"quant": "Q4_1"}, Machine: "test"}
			call := callID(r)
			if err := w.Append(genrecord.Row{RowID: call, Arm: arm, Prompt: call, Role: genrecord.RoleCandidate, K: 1,
				Output: []genrecord.Step{}, StopReason: genrecord.StopEOS, Text: answers[arm][task.ID]}); err != nil {
				t.Fatal(err)
			}
			g, err := reg.Grade(ctx, task, tasks.Output{TaskID: task.ID, Text: answers[arm][task.ID]})
			if err != nil {
				t.Fatal(err)
			}
			r.Grade = &receipts.Grade{Score: g.Score, Pass: g.Pass, Grader: g.Grader, GraderVersion: "1"}
			r.GenerationSHA256 = w.Sum()
			if err := st.PutReceipt(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
	}
	return Execution{Store: st, Exec: "exec-1", Dir: dir, Bank: bank,
		Now: func() time.Time { return time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC) }}
}
