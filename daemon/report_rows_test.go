package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rig/analysis"
	"rig/internal/atomicfile"
	"rig/receipts"
	"rig/report"
	"rig/studies"
	"rig/tasks"
)

// TestReportRowsFromReceipts: the report's per-task values give the
// analysis's pass rates at its gate and on its sweep, and each named pair
// has one row per task with both sides' counted receipts, a preempted
// attempt flagged as a policy block and its governor event attached.
func TestReportRowsFromReceipts(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	// One trial was preempted before its counted attempt; the governor
	// recorded why.
	recs, err := c.st.Receipts(ctx, "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	a0, err := c.svc.Reports().Analyse(ctx, c.name, "")
	if err != nil || len(a0.Report.Pairs) == 0 {
		t.Fatalf("the card study has no pair to show rows for (%v)", err)
	}
	i := slices.IndexFunc(recs, func(r receipts.Receipt) bool { return r.Arm == a0.Report.Pairs[0].Baseline })
	first := recs[i]
	pre := first
	pre.Attempt, pre.ParentAttempt, pre.Outcome, pre.Grade = 2, 1, receipts.Preempted, nil
	if err := c.st.PutReceipt(ctx, pre); err != nil {
		t.Fatal(err)
	}
	trial := studies.TrialKey{Arm: first.Arm, JobKind: first.JobKind, Task: first.TaskID, Repeat: first.Repeat}.String()
	if _, err := c.st.AppendGovernorEvent(ctx, receipts.GovernorEvent{ExecutionID: "exec-1", Trial: trial + "#2", Kind: "preempt"}); err != nil {
		t.Fatal(err)
	}
	// The frozen bank of the job kind: its tasks' templates and tags.
	bank := filepath.Join(t.TempDir(), "extract-json.jsonl")
	lines := `{"schema_version":1,"job_kind":"extract-json","bank_version":"1","description":"rows test"}` + "\n"
	for i := 1; i <= 6; i++ {
		lines += fmt.Sprintf(`{"id":"t%d","job_kind":"extract-json","template_id":"tmpl-%d","difficulty":"easy","tags":["tag-%d"],"input":{"prompt":"p"},"key":{"fields":{"a":"b"}},"grader":{"name":"json-match","version":1},"source":"private"}`+"\n", i, i%2, i)
	}
	if err := os.WriteFile(bank, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := tasks.LoadBank(bank)
	if err != nil {
		t.Fatal(err)
	}
	c.snap.Banks = []studies.FrozenBank{{JobKind: "extract-json", Bank: studies.Bank{Path: bank, SHA256: b.Hash}}}
	c.snap.Hash = ""
	if c.snap.Hash, err = studies.Hash(c.snap); err != nil {
		t.Fatal(err)
	}
	for file, v := range map[string]any{"snapshot.json": c.snap,
		"lifecycle.json": studies.Lifecycle{State: studies.Frozen, DesignHash: c.snap.DesignHash, SnapshotHash: c.snap.Hash, Finished: []string{"exec-1"}}} {
		if err := atomicfile.WriteJSON(filepath.Join(studyDir(t, c.svc, c.name).Dir(), file), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := c.svc.Reports().Analyse(ctx, c.name, "")
	if err != nil {
		t.Fatal(err)
	}
	files, err := c.svc.Reports().Report(ctx, c.name, ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var data report.Data
	if err := atomicfile.ReadJSON(files.JSON, &data); err != nil {
		t.Fatal(err)
	}
	kts := analysis.PerTask(a.Input)
	for i, k := range data.Kinds {
		if k.Scores == nil {
			t.Fatalf("job kind %s has no per-task values", k.Name)
		}
		kr := a.Report.Kinds[i]
		for j, ar := range kr.Arms {
			if got := kts[i].At(kr.Gate).PassRate[j]; got != ar.PassRate {
				t.Errorf("%s: pass rate from the per-task values %v, analysis %v", ar.Arm, got, ar.PassRate)
			}
		}
		if want := len(k.Pairs) * len(k.Scores.Tasks); len(k.Rows) != want {
			t.Errorf("%s: %d rows, want %d (pairs × tasks)", k.Name, len(k.Rows), want)
		}
		for _, r := range k.Rows {
			if r.Baseline.Receipt == nil || r.Challenger.Receipt == nil {
				t.Errorf("row %s lacks a receipt", r.Task)
			}
			// Category and tags come from the frozen bank: the free-text
			// filter matches them.
			if !strings.HasPrefix(r.Category, "tmpl-") || !slices.Contains(r.Tags, "tag-"+strings.TrimPrefix(r.Task, "t")) || !slices.Contains(r.Tags, "difficulty:easy") {
				t.Errorf("row %s: category %q, tags %v (want the bank's template id, tags and difficulty)", r.Task, r.Category, r.Tags)
			}
		}
	}
	blocked := false
	for _, k := range data.Kinds {
		for _, r := range k.Rows {
			for _, s := range []report.RowSide{r.Baseline, r.Challenger} {
				if s.PolicyBlock && s.Receipt != nil && s.Receipt.Trial == trial {
					blocked = blocked || slices.ContainsFunc(s.Receipt.GovernorEvents, func(e string) bool { return len(e) > 0 })
				}
			}
		}
	}
	if !blocked {
		t.Errorf("no row shows %s as a policy block with its governor event", trial)
	}
}
