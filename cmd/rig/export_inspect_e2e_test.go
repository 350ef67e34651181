package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/interop/inspectlog/inspecttest"
)

// TestExportInspectOnARealExecution runs a small real execution of the
// quick study's two llama-server arms (three tasks, two repeats), exports
// it with `rig export inspect`, and reads every log with the real
// inspect-ai: each log validates against the schema `inspect log schema`
// prints, and its sample count, scores and per-step log-probabilities are
// rig's own (the receipts, the generation records, the report's means);
// and `inspect view` serves the folder, which headless Chromium shows with
// its samples.
func TestExportInspectOnARealExecution(t *testing.T) {
	testenv.Long(t, "a real execution of two llama-server arms")
	py, err := provision.TestTool("INSPECT_PYTHON")
	testenv.NeedsSetup(t, "inspect-ai", err)
	bin, err := provision.TestTool("INSPECT_BIN")
	testenv.NeedsSetup(t, "inspect-ai", err)
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "inspect-export"
	d := readDesignMap(t, smallDesign(t, name, 3, false))
	d["repeats"] = 2 // repeats become Inspect's epochs
	design := writeDesignMap(t, d)
	e.prepare(design, name)
	out := e.rig(true, "study", "run", name)
	if m := regexp.MustCompile(`done: (\d+)/(\d+) trials`).FindStringSubmatch(out); m == nil || m[1] != m[2] || m[2] != "12" {
		t.Fatalf("the run did not finish its 12 trials:\n%s", out)
	}

	dir, again := t.TempDir(), t.TempDir()
	exp := e.rig(true, "export", "inspect", name, "--out", dir)
	e.rig(true, "export", "inspect", name, "--out", again)
	m := regexp.MustCompile(`execution (\S+) of`).FindStringSubmatch(exp)
	if m == nil {
		t.Fatalf("export did not name its execution:\n%s", exp)
	}
	exec := m[1]
	files, _ := filepath.Glob(filepath.Join(dir, "*.eval"))
	if len(files) != 2 {
		t.Fatalf("%d logs, want one per arm × job kind (2):\n%s", len(files), exp)
	}
	for _, f := range files {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(again, filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two exports of the same execution (%v)", filepath.Base(f), err)
		}
	}

	// rig's own records: receipts, generation rows by call id, report means.
	grades := map[string]bool{}
	for _, r := range e.exportReceipts(name) {
		if r.ExecutionID == exec && r.Grade != nil {
			grades[fmt.Sprintf("%s/%s/%s/%d#%d", r.Arm, r.JobKind, r.TaskID, r.Repeat, r.Attempt)] = r.Grade.Pass
		}
	}
	rows := map[string]genrecord.Row{}
	recs, _ := filepath.Glob(filepath.Join(e.home, "studies", name, "executions", exec, "generations-*.jsonl"))
	for _, rec := range recs {
		_, rs, err := genrecord.ReadAll(rec)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			rows[r.RowID] = r
		}
	}
	rep := e.rig(true, "study", "report", name)
	means := reportMeans(t, rep)

	logs := inspecttest.Read(t, py, bin, dir)
	if len(logs) != 2 {
		t.Fatalf("inspect read %d logs, want 2", len(logs))
	}
	for _, l := range logs {
		if len(l.SchemaErrors) > 0 {
			t.Errorf("%s does not validate against `inspect log schema`:\n%s", l.File, strings.Join(l.SchemaErrors, "\n"))
		}
		if l.Task != "extract-json" || len(l.Samples) != 6 || l.Status != "success" {
			t.Errorf("%s: task %q, %d samples, status %s; want extract-json, 6 (3 tasks × 2 epochs), success", l.File, l.Task, len(l.Samples), l.Status)
		}
		arm := ""
		for _, s := range l.Samples {
			call, _ := s.Metadata["call_id"].(string)
			arm = strings.SplitN(call, "/", 2)[0]
			pass, ok := grades[call]
			if !ok {
				t.Errorf("%s: sample %s epoch %d names call %q, which has no graded receipt", l.File, s.ID, s.Epoch, call)
				continue
			}
			if want := map[bool]float64{true: 1, false: 0}[pass]; s.Scores["json"] != want {
				t.Errorf("%s: sample %s epoch %d scores %v, the receipt's grade passes: %v", l.File, s.ID, s.Epoch, s.Scores, pass)
			}
			row, ok := rows[call]
			if !ok {
				t.Errorf("%s: no generation row %s", l.File, call)
				continue
			}
			if s.Input != row.RenderedPrompt {
				t.Errorf("%s: sample %s input is not the rendered prompt of its row", l.File, s.ID)
			}
			checkSteps(t, l.File+" "+call, s, row)
		}
		if got, want := l.Metrics["json/task_mean"], means[arm]; arm == "" || abs(got-want) > 1e-9 {
			t.Errorf("%s: task mean %g, the report's mean of arm %q is %g", l.File, got, arm, want)
		}
	}

	checkCompareInspect(t, e, files, means)

	// Inspect's own viewer serves the folder and lists the samples; the
	// screenshot is kept under the test's artifacts (-artifacts).
	first := logs[0].Samples[0]
	text, png := inspecttest.View(t, bin, dir, logs[0].File, first.ID)
	if !strings.Contains(text, "extract-json") || len(png) < 10000 {
		t.Errorf("inspect view shows no task extract-json (screenshot of %d bytes):\n%s", len(png), text)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "inspect-view.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("exported and read back:\n%s", exp)
}

// checkCompareInspect runs `rig compare --from inspect` on the two exported
// logs: the two arms' means in its paired analysis are the report's.
func checkCompareInspect(t *testing.T, e *rigEnv, files []string, means map[string]float64) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "compare.json")
	text := e.rig(true, "compare", "--from", "inspect", files[0], files[1], "--out", out)
	if !strings.Contains(text, "imported evidence") || !strings.Contains(text, "extract-json/json") {
		t.Errorf("rig compare --from inspect:\n%s", text)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Analysis struct {
			Kinds []struct {
				Arms []struct {
					Mean float64 `json:"mean"`
				} `json:"arms"`
			} `json:"kinds"`
			Pairs []struct {
				Tasks int `json:"tasks"`
			} `json:"pairs"`
		} `json:"analysis"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Analysis.Kinds) != 1 || len(c.Analysis.Kinds[0].Arms) != 2 || len(c.Analysis.Pairs) != 1 || c.Analysis.Pairs[0].Tasks != 3 {
		t.Fatalf("rig compare --from inspect: one task × metric of 3 paired tasks expected:\n%s", raw)
	}
	got := []float64{c.Analysis.Kinds[0].Arms[0].Mean, c.Analysis.Kinds[0].Arms[1].Mean}
	var want []float64
	for _, m := range means {
		want = append(want, m)
	}
	if len(want) != 2 || !((abs(got[0]-want[0]) < 1e-9 && abs(got[1]-want[1]) < 1e-9) || (abs(got[0]-want[1]) < 1e-9 && abs(got[1]-want[0]) < 1e-9)) {
		t.Errorf("rig compare --from inspect gives means %v, the report %v", got, want)
	}
}

// checkSteps holds a sample's log-probabilities to its generation row,
// step by step and alternative by alternative.
func checkSteps(t *testing.T, where string, s inspecttest.Sample, row genrecord.Row) {
	t.Helper()
	var scored []genrecord.Step
	for _, st := range row.Output {
		if st.Logprob != nil {
			scored = append(scored, st)
		}
	}
	if len(scored) == 0 || len(s.Steps) != len(scored) {
		t.Errorf("%s: %d steps in the log, %d scored steps in the record", where, len(s.Steps), len(scored))
		return
	}
	for i, st := range scored {
		got := s.Steps[i]
		if got.Token != st.Text || got.Logprob != *st.Logprob || len(got.Top) != len(st.Top) {
			t.Errorf("%s step %d: log %q %g (%d alternatives), record %q %g (%d)", where, i, got.Token, got.Logprob, len(got.Top), st.Text, *st.Logprob, len(st.Top))
			return
		}
		for j, alt := range st.Top {
			if got.Top[j][0] != alt.Text || got.Top[j][1] != alt.Logprob {
				t.Errorf("%s step %d alternative %d: log %v, record %q %g", where, i, j, got.Top[j], alt.Text, alt.Logprob)
				return
			}
		}
	}
}

// reportMeans reads each arm's mean from the analysis the report wrote.
func reportMeans(t *testing.T, rep string) map[string]float64 {
	t.Helper()
	m := regexp.MustCompile(`report: (\S+\.html)`).FindStringSubmatch(rep)
	if m == nil {
		t.Fatalf("report path not printed:\n%s", rep)
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(m[1]), "analysis.json"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Report struct {
			Kinds []struct {
				Arms []struct {
					Arm  string  `json:"arm"`
					Mean float64 `json:"mean"`
				} `json:"arms"`
			} `json:"kinds"`
		} `json:"report"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	means := map[string]float64{}
	for _, k := range a.Report.Kinds {
		for _, arm := range k.Arms {
			means[arm.Arm] = arm.Mean
		}
	}
	return means
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
