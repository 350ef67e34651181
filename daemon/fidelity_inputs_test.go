package daemon

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/fidelity"
	"rig/internal/atomicfile"
	"rig/report"
	"rig/report/findings"
	"rig/studies"
)

// TestReadFidelityBesideTheRecords: the report's inputs read an
// execution's fidelity.jsonl when it is there (here a fake one, two tasks
// of one arm), leave the evidence without fidelity when it is not, and fail,
// naming the file, when it does not read.
func TestReadFidelityBesideTheRecords(t *testing.T) {
	d := &studies.Design{Arms: []studies.Arm{{Name: "q8", Role: studies.RoleIncumbent}, {Name: "q4", Role: studies.RoleCandidate}},
		JobKinds: []studies.JobKind{{Name: "qa", Reference: "q8"}}}
	ev := func() *findings.Evidence {
		return &findings.Evidence{Study: "s", Design: d, Snapshot: &studies.Snapshot{DesignHash: strings.Repeat("0f", 32)}}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, fidelity.StudyFile)

	none := ev()
	if err := readFidelity(context.Background(), path, none); err != nil || none.Fidelity != nil {
		t.Fatalf("no file: err %v, fidelity %+v; want neither", err, none.Fidelity)
	}

	var lines []string
	for _, task := range []string{"t1", "t2"} {
		rec := fidelity.StudyRecord{JobKind: "qa", Reference: "q8", Arm: "q4", Task: task, RowID: "q8/qa/" + task + "/1#1", ScoredBy: fidelity.ScoredByStack,
			Tokens: []fidelity.Token{{KL: 0.01, RefTop: 1, ArmTop: 1}, {KL: 0.03, RefTop: 2, ArmTop: 3}}}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	some := ev()
	if err := readFidelity(context.Background(), path, some); err != nil {
		t.Fatal(err)
	}
	sec := some.Fidelity.Kinds["qa"]
	if sec == nil || len(sec.Arms) != 1 || sec.Arms[0].Tasks != 2 || sec.Arms[0].MeanKL.Value != 0.02 {
		t.Fatalf("fidelity %+v; want q4 over 2 tasks, mean KL 0.02", sec)
	}
	if len(some.Fidelity.Deltas) != 1 || some.Fidelity.Deltas[0].Candidate != "q4" || some.Fidelity.Deltas[0].Baseline != "q8" {
		t.Errorf("deltas %+v; want q4 vs its reference q8, for the guardrail", some.Fidelity.Deltas)
	}

	if err := os.WriteFile(path, []byte(`{"job_kind": "qa", "arm": "q4"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := readFidelity(context.Background(), path, ev()); err == nil || !strings.Contains(err.Error(), fidelity.StudyFile) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a record that does not read: err %v; want one naming %s and the line", err, fidelity.StudyFile)
	}
}

// TestReportShowsFidelityOfACardCell: a card sub-study whose execution kept
// a (fake) fidelity.jsonl for one cell, and the reference's cell held to
// itself, reports it: the job kind's section held to the reference's cell,
// and the card table's fidelity column with the cell's figure and the
// reference's cell marked as the reference.
func TestReportShowsFidelityOfACardCell(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	var cell, ref studies.Arm
	for _, a := range c.d.Arms {
		if a.Card != nil && a.Card.Name != "simulated-1gib" {
			switch a.BaseArm {
			case "smollm2-llama-server":
				cell = a
			case "smollm2-q8-llama-server":
				ref = a
			}
		}
	}
	if cell.Name == "" || ref.Name == "" {
		t.Fatalf("fixture: no cells at the full profile among %v", c.d.Arms)
	}
	x, err := c.svc.execution(c.name, "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(x.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 6 {
		task := "t" + string(rune('1'+i))
		rec := fidelity.StudyRecord{JobKind: "extract-json", Reference: ref.Name, Arm: cell.Name, Task: task, RowID: ref.Name + "/extract-json/" + task + "/1#1",
			ScoredBy: fidelity.ScoredByStack, Profile: cell.Card.Name,
			Tokens: []fidelity.Token{{KL: 0.004 + 0.001*float64(i), RefTop: 5, ArmTop: 5}, {KL: 0.02, RefTop: 6, ArmTop: 7}}}
		self := rec // the reference held to itself, as the runner keeps it
		self.Arm, self.Tokens = ref.Name, []fidelity.Token{{RefTop: 5, ArmTop: 5}, {RefTop: 6, ArmTop: 6}}
		for _, r := range []fidelity.StudyRecord{rec, self} {
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(append(line, '\n'))
		}
	}
	if err := os.WriteFile(filepath.Join(x.Dir(), fidelity.StudyFile), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := c.svc.Reports().Report(ctx, c.name, ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(files.Markdown)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Fidelity to " + ref.Name, "| profile |", "not correctness", "| fidelity: mean KL [interval] |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	var data report.Data
	if err := atomicfile.ReadJSON(files.JSON, &data); err != nil {
		t.Fatal(err)
	}
	// Task i's mean KL is (0.004 + 0.001i + 0.02) / 2; over the six tasks,
	// 0.01325.
	scored, reference := 0, 0
	for _, r := range data.Cards.Rows {
		if r.FidelityReference {
			reference++
			if r.Model != ref.BaseArm || r.Profile != ref.Card.Name || r.Fidelity != nil {
				t.Errorf("card row %s @ %s marked the reference; want only %s @ %s, with no figure", r.Model, r.Profile, ref.BaseArm, ref.Card.Name)
			}
		}
		if r.Fidelity != nil {
			scored++
			if r.Model != cell.BaseArm || r.Profile != cell.Card.Name || math.Abs(r.Fidelity.Value-0.01325) > 1e-12 {
				t.Errorf("card row %s @ %s has fidelity %+v; want only %s @ %s, mean KL 0.01325", r.Model, r.Profile, r.Fidelity, cell.BaseArm, cell.Card.Name)
			}
		}
	}
	if scored != 1 || reference != 1 {
		t.Errorf("%d card rows with fidelity and %d marked the reference; want 1 and 1", scored, reference)
	}
	if k := data.Kinds[0].Fidelity; k == nil || len(k.Arms) != 1 || k.Arms[0].Arm != cell.Name || len(k.Pairs) != 0 {
		t.Errorf("job kind's section %+v; want %s alone (the reference is no row; the design pairs no two cells of one profile)", k, cell.Name)
	}
}
