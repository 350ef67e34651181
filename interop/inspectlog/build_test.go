package inspectlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/interop/inspectlog/inspecttest"
	"rig/receipts"
	"rig/studies"
	"rig/tasks"
)

func lp(x float64) *float64 { return &x }

// fakeExecution is an execution made in code (no runtime ran it): arm "a"
// on job kind "qa", task t1 in two repeats (the first preempted once, then
// passed; the second failed) and task t2 whose only attempt was an error.
func fakeExecution() Execution {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	rec := func(task string, repeat, attempt int, out receipts.Outcome, pass bool) receipts.Receipt {
		r := receipts.Receipt{SchemaVersion: 1, StudyID: "s1", ExecutionID: "e1", DesignHash: strings.Repeat("d", 64),
			Arm: "a", JobKind: "qa", TaskID: task, Repeat: repeat, Attempt: attempt, Outcome: out,
			ModelName: "m", ModelDigest: strings.Repeat("a", 64), Runtime: "llama-server", Harness: "llama-server",
			Pins: map[string]string{"quant": "Q4_1", "context": "2048"}, InputTokens: 10, OutputTokens: 2, WallMS: 1500,
			StartedAt: at.Add(time.Duration(repeat*10+attempt) * time.Second), FinishedAt: at.Add(time.Duration(repeat*10+attempt+1) * time.Second)}
		if out.Counted() {
			score := 0.0
			if pass {
				score = 1
			}
			r.Grade = &receipts.Grade{Score: score, Pass: pass, Grader: "exact", GraderVersion: "1"}
			r.GenerationSHA256 = strings.Repeat("f", 64)
		} else {
			r.Detail = "runtime crashed"
		}
		return r
	}
	design := &studies.Design{
		Arms:     []studies.Arm{{Name: "a", Runtime: "llama-server", Model: studies.Model{RegistryName: "SmolLM2"}}},
		JobKinds: []studies.JobKind{{Name: "qa", RankingMeasure: studies.Measure{Name: "pass_rate"}, Grader: studies.Grader{Name: "exact", Version: 1}}},
	}
	row := func(id, text string, lps ...float64) genrecord.Row {
		r := genrecord.Row{Kind: genrecord.KindRow, RowID: id, Arm: "a", RenderedPrompt: "<|user|>Capital of France?", K: 2, StopReason: genrecord.StopEOS,
			Sampling: genrecord.Sampling{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42, MaxTokens: 96}}
		for i, x := range lps {
			tok := string(text[i])
			r.Output = append(r.Output, genrecord.Step{Text: tok, Logprob: lp(x), Top: []genrecord.Alt{{Text: tok, Logprob: x}, {Text: "?", Logprob: x - 2}}})
		}
		return r
	}
	return Execution{
		Study: "s1", ID: "e1", DesignHash: strings.Repeat("d", 64), Design: design,
		Banks: map[string]Bank{"qa": {Name: "capitals", Path: "/banks/capitals.jsonl", Hash: strings.Repeat("b", 64), Tasks: map[string]tasks.Task{
			"t1": {ID: "t1", Input: tasks.Input{Prompt: "Capital of France?"}, Key: json.RawMessage(`"Paris"`)},
			"t2": {ID: "t2", Input: tasks.Input{Prompt: "2+2?"}, Key: json.RawMessage(`{"answer":"4"}`)},
		}}},
		Receipts: []receipts.Receipt{
			rec("t1", 1, 1, receipts.Preempted, false), rec("t1", 1, 2, receipts.Scored, true),
			rec("t1", 2, 1, receipts.Scored, false), rec("t2", 1, 1, receipts.Error, false),
		},
		Rows: map[string][]genrecord.Row{"a": {row("a/qa/t1/1#2", "Pa", -0.25, -0.5), row("a/qa/t1/2#1", "L", -1.5)}},
	}
}

func TestBuildMapsTrialsToSamples(t *testing.T) {
	logs, err := Build(fakeExecution())
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 {
		t.Fatalf("%d logs, want one per arm × job kind (1)", len(logs))
	}
	l := logs[0]
	if l.Eval.Task != "qa" || l.Eval.Model != "llama-server/SmolLM2" || l.Eval.Revision.Commit != strings.Repeat("d", 64) {
		t.Errorf("spec: task %q model %q revision %+v", l.Eval.Task, l.Eval.Model, l.Eval.Revision)
	}
	if len(l.Samples) != 3 {
		t.Fatalf("%d samples, want 3 (one per trial)", len(l.Samples))
	}
	s1, s2, s3 := l.Samples[0], l.Samples[1], l.Samples[2]
	if s1.ID != "t1" || s1.Epoch != 1 || s2.Epoch != 2 || s3.ID != "t2" {
		t.Errorf("ids/epochs: %s/%d %s/%d %s/%d", s1.ID, s1.Epoch, s2.ID, s2.Epoch, s3.ID, s3.Epoch)
	}
	if s1.Scores["exact"].Value != 1 || len(s1.ErrorRetries) != 1 || s1.Error != nil {
		t.Errorf("t1 epoch 1: scores %v, retries %d, error %v; want a pass with the preempted attempt as a retry", s1.Scores, len(s1.ErrorRetries), s1.Error)
	}
	if s3.Error == nil || s3.Scores != nil || !strings.Contains(s3.Error.Message, "error: runtime crashed") {
		t.Errorf("t2: an error attempt must be the sample's error and no score; got error %v scores %v", s3.Error, s3.Scores)
	}
	if s1.Target != "Paris" || s3.Target != `{"answer":"4"}` || s1.Input != "<|user|>Capital of France?" || s3.Input != "2+2?" {
		t.Errorf("targets %q %q, inputs %q %q", s1.Target, s3.Target, s1.Input, s3.Input)
	}
	steps := s1.Output.Choices[0].Logprobs.Content
	if len(steps) != 2 || steps[1].Logprob != -0.5 || len(steps[1].TopLogprobs) != 2 || steps[1].TopLogprobs[1].Logprob != -2.5 {
		t.Errorf("logprobs: %+v", steps)
	}
	m := l.Results.Scores[0].Metrics
	if m["mean"].Value != 0.5 || l.Results.Scores[0].ScoredSamples != 2 || l.Results.Scores[0].UnscoredSamples != 1 {
		t.Errorf("results: %+v", l.Results.Scores[0])
	}
	if lo, hi := m["ci_lower"].Value, m["ci_upper"].Value; !(lo < 0.5 && hi > 0.5) {
		t.Errorf("interval [%g, %g] does not hold the task mean", lo, hi)
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	var files [2][]byte
	var names [2]string
	for i := range files {
		logs, err := Build(fakeExecution())
		if err != nil {
			t.Fatal(err)
		}
		paths, err := Write(t.TempDir(), logs)
		if err != nil {
			t.Fatal(err)
		}
		names[i] = filepath.Base(paths[0])
		if files[i], err = os.ReadFile(paths[0]); err != nil {
			t.Fatal(err)
		}
	}
	if names[0] != names[1] || !bytes.Equal(files[0], files[1]) {
		t.Errorf("two writes of the same execution differ: %s (%d bytes) and %s (%d bytes)", names[0], len(files[0]), names[1], len(files[1]))
	}
	if !strings.HasPrefix(names[0], "2026-12-06T10-00-11+00-00_qa_a_") {
		t.Errorf("file name %s does not begin with the creation time, job kind and arm", names[0])
	}
}

func TestBuildRefusesAnUndeclaredArm(t *testing.T) {
	x := fakeExecution()
	x.Receipts[0].Arm = "ghost"
	if _, err := Build(x); err == nil || !strings.Contains(err.Error(), `arm "ghost"`) {
		t.Errorf("err = %v, want one naming the arm", err)
	}
}

// TestInspectReadsTheLogs reads the logs of the fake execution with the
// real inspect-ai (its reader and the schema its CLI prints): the format
// check without a study run. cmd/rig's end-to-end test does the same on a
// real execution.
func TestInspectReadsTheLogs(t *testing.T) {
	py, err := provision.TestTool("INSPECT_PYTHON")
	testenv.NeedsSetup(t, "inspect-ai", err)
	bin, err := provision.TestTool("INSPECT_BIN")
	testenv.NeedsSetup(t, "inspect-ai", err)
	logs, err := Build(fakeExecution())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Write(dir, logs); err != nil {
		t.Fatal(err)
	}
	got := inspecttest.Read(t, py, bin, dir)
	if len(got) != 1 {
		t.Fatalf("inspect read %d logs, want 1", len(got))
	}
	l := got[0]
	if len(l.SchemaErrors) > 0 {
		t.Errorf("the log does not validate against `inspect log schema`:\n%s", strings.Join(l.SchemaErrors, "\n"))
	}
	by := map[string]inspecttest.Sample{}
	for _, s := range l.Samples {
		by[fmt.Sprintf("%s/%d", s.ID, s.Epoch)] = s
	}
	if len(l.Samples) != 3 || by["t1/1"].Scores["exact"] != 1 || by["t1/2"].Scores["exact"] != 0 || by["t2/1"].Error == "" || by["t1/1"].Retries != 1 {
		t.Errorf("inspect read: %+v", l.Samples)
	}
	if len(by["t2/1"].Scores) != 0 {
		t.Errorf("the error sample has scores %v", by["t2/1"].Scores)
	}
	if s := by["t1/1"].Steps; len(s) != 2 || s[1].Logprob != -0.5 || s[1].Top[1][1] != -2.5 {
		t.Errorf("inspect read steps %+v", s)
	}
	if l.Metrics["exact/mean"] != 0.5 {
		t.Errorf("inspect read metrics %v", l.Metrics)
	}
}

// TestInspectViewShowsTheSamples serves the fake execution's log with the
// real `inspect view` and opens it in headless Chromium: the page lists its
// samples. The screenshot is kept under the test's artifacts (-artifacts).
func TestInspectViewShowsTheSamples(t *testing.T) {
	testenv.Long(t, "inspect view and headless Chromium")
	bin, err := provision.TestTool("INSPECT_BIN")
	testenv.NeedsSetup(t, "inspect-ai", err)
	logs, err := Build(fakeExecution())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := Write(dir, logs)
	if err != nil {
		t.Fatal(err)
	}
	text, png := inspecttest.View(t, bin, dir, filepath.Base(paths[0]), "Capital of France?")
	if !strings.Contains(text, "2+2?") {
		t.Errorf("the viewer shows the first sample but not the others:\n%s", text)
	}
	if len(png) < 10000 {
		t.Errorf("screenshot of %d bytes: the page drew nothing", len(png))
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "inspect-view.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
