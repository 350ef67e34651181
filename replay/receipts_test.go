package replay

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/receipts"
	"rig/studies"
	"rig/studies/studytest"
)

// receiptRecord writes a record of three rows as an execution does, one
// trial per row, and returns the sums each trial's receipt would keep.
func receiptRecord(t *testing.T) (string, []ReceiptSum) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "generations-a.jsonl")
	pins := genrecord.Pins{ModelSHA256: strings.Repeat("a", 64), ModelName: "m", Runtime: "llama-server", RuntimeVersion: "b1",
		BinarySHA256: strings.Repeat("b", 64), Libraries: map[string]string{}, MachineLine: "test", DesignHash: "d", StudyID: "s1", ExecutionID: "exec-1"}
	w, err := genrecord.OpenWriter(path, pins)
	if err != nil {
		t.Fatal(err)
	}
	var sums []ReceiptSum
	for i, text := range []string{"invoice 4417", "total 12", "paid"} {
		id := []string{"t1", "t2", "t3"}[i]
		if err := w.Append(genrecord.Row{RowID: id, Arm: "a", Prompt: id, Role: genrecord.RoleCandidate, K: 1,
			Output: []genrecord.Step{}, StopReason: genrecord.StopEOS, Text: text}); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, ReceiptSum{Trial: "a|" + id + "|1", Attempt: 1, SHA256: w.Sum()})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path, sums
}

func TestCheckReceiptsAcceptsTheRecordAsItsReceiptsSay(t *testing.T) {
	path, sums := receiptRecord(t)
	whole, matched, err := CheckReceipts(path, sums)
	if err != nil {
		t.Fatal(err)
	}
	if whole != sums[2].SHA256 || !strings.Contains(matched, "trial a|t3|1 attempt 1") {
		t.Errorf("sum %s, matched %q; want the newest receipt's %s", whole, matched, sums[2].SHA256)
	}
	// Receipts come in key order, not write order: the newest is the one
	// covering the most lines.
	if _, _, err := CheckReceipts(path, []ReceiptSum{sums[2], sums[0], sums[1]}); err != nil {
		t.Errorf("receipts out of order: %v", err)
	}
}

func TestCheckReceiptsRefusesAChangedRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(data []byte) []byte
		want   string
	}{
		{"text edited", func(d []byte) []byte { return bytes.Replace(d, []byte("4417"), []byte("4418"), 1) }, "the record cut at no line hashes to it"},
		{"row appended", func(d []byte) []byte {
			last := d[bytes.LastIndexByte(d[:len(d)-1], '\n')+1:]
			return append(d, bytes.Replace(last, []byte(`"t3"`), []byte(`"t4"`), 2)...)
		}, "lines were added after every receipt"},
		{"last row cut off", func(d []byte) []byte { return d[:bytes.LastIndexByte(d[:len(d)-1], '\n')+1] }, "the record cut at no line hashes to it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, sums := receiptRecord(t)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.change(data), 0o644); err != nil {
				t.Fatal(err)
			}
			now, _ := genrecord.SumFile(path)
			_, _, err = CheckReceipts(path, sums)
			if !errors.Is(err, genrecord.ErrSumMismatch) {
				t.Fatalf("error %v, want a sum mismatch", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, now) {
				t.Errorf("error %q: want %q and the file's sha256 %s", msg, tc.want, now)
			}
			named := false
			for _, s := range sums {
				named = named || strings.Contains(msg, s.SHA256)
			}
			if !named {
				t.Errorf("error %q names no receipt's sha256", msg)
			}
		})
	}
}

// callID names a trial's row in the fixture's records as the runner does.
func callID(r receipts.Receipt) string {
	return studies.TrialKey{Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat}.CallID(r.Attempt)
}

func TestStoreSumsReadsTheExecutionsReceipts(t *testing.T) {
	ex := studytest.StoredExecution(t, callID)
	storePath := ex.Store.Path()
	if err := ex.Store.Close(); err != nil { // a second open would wait on the lock
		t.Fatal(err)
	}
	rec := filepath.Join(ex.Dir, "generations-a.jsonl")
	sums, err := StoreSums(t.Context(), storePath, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 {
		t.Fatalf("%d receipt sums for arm a, want 2 (one per task): %+v", len(sums), sums)
	}
	if _, _, err := CheckReceipts(rec, sums); err != nil {
		t.Errorf("the fixture's record against its own receipts: %v", err)
	}
	// Arm b's receipts do not vouch for arm a's record.
	other, _ := StoreSums(t.Context(), storePath, filepath.Join(ex.Dir, "generations-b.jsonl"))
	if _, _, err := CheckReceipts(rec, other); !errors.Is(err, genrecord.ErrSumMismatch) {
		t.Errorf("arm a's record against arm b's receipts: %v", err)
	}
	if _, err := StoreSums(t.Context(), filepath.Join(ex.Dir, "nope.bolt"), rec); err == nil || !strings.Contains(err.Error(), "--store") {
		t.Errorf("a missing store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ex.Dir, "nope.bolt")); err == nil {
		t.Errorf("a missing store was created")
	}
}

func TestSumsOfSkipsReceiptsThatVouchForNothing(t *testing.T) {
	rs := []receipts.Receipt{
		{Arm: "a", TaskID: "x", Repeat: 1, Attempt: 1, GenerationSHA256: strings.Repeat("1", 64)},
		{Arm: "a", TaskID: "y", Repeat: 1, Attempt: 1, GenerationSHA256: genrecord.EmptySum},
		{Arm: "a", TaskID: "z", Repeat: 1, Attempt: 2},
		{Arm: "b", TaskID: "x", Repeat: 1, Attempt: 1, GenerationSHA256: strings.Repeat("2", 64)},
	}
	got := SumsOf(rs, "a")
	if len(got) != 1 || got[0].SHA256 != strings.Repeat("1", 64) || got[0].Trial != "a|x|1" {
		t.Errorf("SumsOf = %+v, want arm a's one receipt with a record sum", got)
	}
}
