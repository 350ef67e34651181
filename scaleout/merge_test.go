package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
	"rig/replay"
	"rig/run"
	"rig/studies"
	"rig/studies/studytest"
	"rig/tasks"

	"rig/runtimes"
)

// fakeStudies is the daemon's side, faked: one study with its real store.
// after, when set, is its steps after the trials; else it has none.
type fakeStudies struct {
	snap  *studies.Snapshot
	st    *receipts.Store
	dir   string
	after func(ctx context.Context, e receipts.Execution, say func(string)) error
}

func (f fakeStudies) Snapshot(string) (*studies.Snapshot, error) { return f.snap, nil }
func (f fakeStudies) Store(string) (*receipts.Store, error)      { return f.st, nil }
func (f fakeStudies) ExecDir(_, execution string) string         { return filepath.Join(f.dir, execution) }
func (f fakeStudies) AfterTrials(ctx context.Context, _ string, e receipts.Execution, say func(string)) error {
	if f.after == nil {
		return nil
	}
	return f.after(ctx, e, say)
}

var (
	modelSHA  = strings.Repeat("a", 64)
	binarySHA = strings.Repeat("b", 64)
)

func mergeFixture(t *testing.T) (*Coordinator, fakeStudies, string) {
	t.Helper()
	x := studytest.StoredExecution(t, run.TrialCallID)
	ctx := context.Background()
	if err := x.Store.PutExecution(ctx, receipts.Execution{ID: "exec-2", Attempt: 1, Status: receipts.Running, DesignHash: studytest.ExecutionHash}); err != nil {
		t.Fatal(err)
	}
	// A real design and a real bank on disk: the coordinator lays out the
	// plan from them and grades with the bank's own graders.
	bankPath := filepath.Join(t.TempDir(), "qa.jsonl")
	lines := `{"schema_version":1,"job_kind":"qa","bank_version":"1","description":"capitals and sums"}
{"id":"capital","job_kind":"qa","template_id":"t","difficulty":"easy","input":{"prompt":"capital?"},"key":{"answer":"Paris"},"grader":{"name":"exact","version":1},"holdout":false,"source":"private"}
{"id":"sum","job_kind":"qa","template_id":"t","difficulty":"easy","input":{"prompt":"2+2?"},"key":{"answer":"4"},"grader":{"name":"exact","version":1},"holdout":false,"source":"private"}
`
	if err := os.WriteFile(bankPath, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	bank, err := tasks.LoadBank(bankPath)
	if err != nil {
		t.Fatal(err)
	}
	snap := fixtureSnapshot(t)
	snap.Banks = []studies.FrozenBank{{JobKind: "qa", Bank: studies.Bank{Path: bankPath, SHA256: bank.Hash, Tasks: []string{"capital", "sum"}}}}
	f := fakeStudies{snap: snap, st: x.Store, dir: t.TempDir()}
	spool := t.TempDir()
	// A lost attempt waits for a report of its worker's whole entry a few
	// seconds here, not lostReportWait.
	c := &Coordinator{cfg: Config{Spool: spool}, studies: f, log: slog.Default(), writers: map[string]*genrecord.Writer{}, reportWait: 3 * time.Second}
	t.Cleanup(func() {
		for _, w := range c.writers {
			w.Close()
		}
	})
	return c, f, spool
}

// fixtureSnapshot is mergeFixture's snapshot without its bank: one
// llama-server arm with a model, pins and a simulated card of its own, so
// that a receipt has something of the arm's to lie about.
func fixtureSnapshot(t *testing.T) *studies.Snapshot {
	t.Helper()
	d := &studies.Design{Name: "s1", Repeats: 2,
		CardProfile: studies.CardProfile{Name: "test-card", MemoryMiB: 8192, Simulated: true},
		Arms: []studies.Arm{{Name: "a", Role: studies.RoleIncumbent, Runtime: "llama-server", Model: studies.Model{RegistryName: "m"},
			Pins: studies.Pins{Quant: "Q8_0", Context: 4096, Sampling: studies.Sampling{Temperature: 0.7, Seed: 7}, StopCap: 256}}},
		JobKinds: []studies.JobKind{{Name: "qa", RankingMeasure: studies.Measure{Name: "pass_rate"}, Grader: studies.Grader{Name: "exact", Version: 1}}}}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return &studies.Snapshot{DesignHash: studytest.ExecutionHash, Design: raw, Arms: []studies.FrozenArm{
		{Name: "a", ModelSHA256: modelSHA, Binaries: []studies.Binary{{Component: "llama-server", SHA256: binarySHA}}}}}
}

// writeEntry leaves a worker's spool entry for trial a/qa/capital/1 at
// attempt 1 whose record holds one row with text, and returns what the
// worker's activity would return.
func writeEntry(t *testing.T, spool, worker, text string, edit func(*receipts.Receipt)) TrialResult {
	t.Helper()
	return writeEntryOf(t, spool, studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 1}, 1, worker, text, edit)
}

// writeEntryOf is writeEntry for another trial key and attempt.
func writeEntryOf(t *testing.T, spool string, key studies.TrialKey, attempt int, worker, text string, edit func(*receipts.Receipt)) TrialResult {
	t.Helper()
	entry := entryName(key.String(), attempt, worker)
	dir := filepath.Join(spool, "s1", "exec-2", "trials", entry)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	pins := genrecord.Pins{ModelSHA256: modelSHA, ModelName: "m", Runtime: "llama-server", RuntimeVersion: "b1", BinarySHA256: binarySHA,
		Libraries: map[string]string{}, BuildFlags: "cpu", MachineLine: "test", DesignHash: studytest.ExecutionHash, StudyID: "s1", ExecutionID: "exec-2"}
	os.Remove(layout.Records(dir).TrialRecord())
	w, err := genrecord.OpenWriter(layout.Records(dir).TrialRecord(), pins)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(genrecord.Row{RowID: key.CallID(attempt), Arm: "a", Prompt: "capital?", Role: genrecord.RoleCandidate, K: 1,
		Output: []genrecord.Step{}, StopReason: genrecord.StopEOS, Text: text}); err != nil {
		t.Fatal(err)
	}
	sum := w.Sum()
	w.Close()
	// What a worker's runner starts every receipt from (run's newReceipt,
	// which UnrunReceipt calls): the arm's own fields and pins.
	r, err := run.UnrunReceipt("s1", fixtureSnapshot(t), "exec-2", key, attempt, attempt-1, receipts.Preempted, text)
	if err != nil {
		t.Fatal(err)
	}
	r.Outcome, r.HarnessVersion, r.Machine, r.GenerationSHA256, r.Grade = receipts.Scored, "b1", "test", sum, exactGrade(t, key.Task, text)
	r.Pins["binary_sha256"] = binarySHA
	if edit != nil {
		edit(&r)
	}
	raw, _ := json.Marshal(r)
	if err := os.WriteFile(layout.Records(dir).Receipt(), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return TrialResult{Study: "s1", Execution: "exec-2", Key: key.String(), Attempt: attempt, Worker: worker, Entry: entry, ReceiptSHA256: sha256Hex(raw), RecordSHA256: sum, Outcome: "scored"}
}

// exactGrade is what an honest worker's runner grades text with for the
// fixture's task: the exact grader against its key ("Paris", "4").
func exactGrade(t *testing.T, task, text string) *receipts.Grade {
	t.Helper()
	key := map[string]string{"capital": `{"answer":"Paris"}`, "sum": `{"answer":"4"}`}[task]
	tk := tasks.Task{ID: task, JobKind: "qa", Key: json.RawMessage(key), Grader: tasks.GraderRef{Name: "exact", Version: 1}}
	g, err := tasks.NewRegistry(tasks.Exact{}).Grade(context.Background(), tk, tasks.Output{TaskID: task, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return &receipts.Grade{Score: g.Score, Pass: g.Pass, Grader: g.Grader, GraderVersion: strconv.Itoa(g.Version)}
}

func export(t *testing.T, st *receipts.Store) string {
	t.Helper()
	var b bytes.Buffer
	if err := st.Export(context.Background(), &b, receipts.JSONL); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func merge(t *testing.T, c *Coordinator, tr TrialResult) (MergeResult, error) {
	t.Helper()
	key, err := studies.ParseTrialKey(tr.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c.MergeEntry(context.Background(), "s1", "exec-2", key, tr)
}

func TestMergeIsPutIfAbsentByKeyAndAttempt(t *testing.T) {
	c, f, spool := mergeFixture(t)
	ctx := context.Background()
	tr := writeEntry(t, spool, "w1", "Paris", nil)
	m, err := merge(t, c, tr)
	if err != nil || m.Already || m.Divergent || m.Outcome != "scored" {
		t.Fatalf("first merge: %+v, %v", m, err)
	}
	first := export(t, f.st)
	rec, err := f.st.Receipt(ctx, "exec-2", receipts.TrialKey{Arm: "a", TaskID: "capital", Repeat: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Pins["worker"] != "w1" || rec.Pins["spool_receipt_sha256"] != tr.ReceiptSHA256 || rec.Pins["spool_record_sha256"] != tr.RecordSHA256 {
		t.Errorf("merged receipt's pins: %v", rec.Pins)
	}
	// The receipt vouches for the arm's record of the execution as merged.
	armRecord := filepath.Join(f.dir, "exec-2", "generations-a.jsonl")
	if got, err := fileSHA256(armRecord); err != nil || got != rec.GenerationSHA256 {
		t.Errorf("arm record sha256 %s, receipt says %s (%v)", got, rec.GenerationSHA256, err)
	}

	// The same entry again: a no-op, the export byte-identical.
	if m, err := merge(t, c, tr); err != nil || !m.Already {
		t.Fatalf("second merge of the same receipt: %+v, %v", m, err)
	}
	if export(t, f.st) != first {
		t.Error("merging the same receipt twice changed the export")
	}
	rd, err := genrecord.OpenReader(armRecord)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for {
		if _, err := rd.Next(); err != nil {
			break
		}
		rows++
	}
	rd.Close()
	if rows != 1 {
		t.Errorf("the arm record holds %d rows after two merges of one trial, want 1", rows)
	}

	// Another worker's different receipt for the same key and attempt: kept
	// apart as a divergent duplicate, never over the first.
	other := writeEntry(t, spool, "w2", "paris", nil)
	m, err = merge(t, c, other)
	if err != nil || !m.Divergent {
		t.Fatalf("a different receipt for a merged key and attempt: %+v, %v", m, err)
	}
	if export(t, f.st) != first {
		t.Error("a divergent duplicate changed the merged receipts")
	}
	ds, err := f.st.Divergents(ctx, "exec-2")
	if err != nil || len(ds) != 1 || ds[0].Worker != "w2" || ds[0].Digest != other.ReceiptSHA256 {
		t.Errorf("divergent duplicates: %+v, %v", ds, err)
	}
	if m, err := merge(t, c, other); err != nil || !m.Divergent {
		t.Errorf("the divergent duplicate again: %+v, %v", m, err)
	}
	if ds, _ := f.st.Divergents(ctx, "exec-2"); len(ds) != 1 {
		t.Errorf("the same divergent duplicate twice is kept %d times", len(ds))
	}
}

func TestMergeRefusesACutOrForeignEntry(t *testing.T) {
	c, f, spool := mergeFixture(t)
	ctx := context.Background()
	rk := receipts.TrialKey{Arm: "a", TaskID: "capital", Repeat: 1}

	// Cut mid-file: the receipt is shorter than the worker sent.
	tr := writeEntry(t, spool, "w1", "Paris", nil)
	path := layout.Records(filepath.Join(spool, "s1", "exec-2", "trials", tr.Entry)).Receipt()
	raw, _ := os.ReadFile(path)
	os.WriteFile(path, raw[:len(raw)/2], 0o644)
	_, err := merge(t, c, tr)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrSpool || appErr.NonRetryable() {
		t.Fatalf("a cut receipt: %v, want a retryable %s error", err, ErrSpool)
	}
	if _, err := f.st.Receipt(ctx, "exec-2", rk, 1); !errors.Is(err, receipts.ErrNotFound) {
		t.Errorf("a cut entry was merged: %v", err)
	}
	// Cut record: the receipt is whole, its record is not.
	tr = writeEntry(t, spool, "w1", "Paris", nil)
	rec := layout.Records(filepath.Join(spool, "s1", "exec-2", "trials", tr.Entry)).TrialRecord()
	data, _ := os.ReadFile(rec)
	os.WriteFile(rec, data[:len(data)-10], 0o644)
	if _, err := merge(t, c, tr); !errors.As(err, &appErr) || appErr.Type() != ErrSpool {
		t.Errorf("a cut record: %v, want %s", err, ErrSpool)
	}
	// Whole again: the retried merge goes through.
	tr = writeEntry(t, spool, "w1", "Paris", nil)
	if m, err := merge(t, c, tr); err != nil || m.Outcome != "scored" {
		t.Fatalf("the retried merge of a whole entry: %+v, %v", m, err)
	}

	// Another design, or another model: never merged, never retried.
	for name, edit := range map[string]func(*receipts.Receipt){
		"design hash": func(r *receipts.Receipt) { r.DesignHash = strings.Repeat("9", 64) },
		"model":       func(r *receipts.Receipt) { r.ModelDigest = strings.Repeat("d", 64) },
		"binary":      func(r *receipts.Receipt) { r.Pins["binary_sha256"] = strings.Repeat("e", 64) },
	} {
		tr := writeEntry(t, spool, "w3", "Paris", edit)
		_, err := merge(t, c, tr)
		if !errors.As(err, &appErr) || appErr.Type() != ErrMismatch || !appErr.NonRetryable() {
			t.Errorf("%s differs: %v, want a non-retryable %s", name, err, ErrMismatch)
		}
	}
}

func TestEntryNamesRoundTrip(t *testing.T) {
	for _, k := range []studies.TrialKey{{Arm: "a", JobKind: "qa", Task: "t/with/slashes", Repeat: 3}, {Arm: "x-y", JobKind: "code", Task: "t#1.2 %", Repeat: 1}} {
		name := entryName(k.String(), 7, "gpu07.card0")
		if strings.ContainsAny(name, "/") {
			t.Errorf("%q is not one path element", name)
		}
		got, attempt, worker, err := parseEntryName(name)
		if err != nil || got != k || attempt != 7 || worker != "gpu07.card0" {
			t.Errorf("%q → %v %d %q %v", name, got, attempt, worker, err)
		}
	}
}

func TestQueueNames(t *testing.T) {
	q := Queue("llama-server", binarySHA, CardClass("NVIDIA H200", 143771<<20))
	if q != "rig.trials.llama-server.bbbbbbbbbbbbbbbb.h200-140gib" {
		t.Errorf("queue %q", q)
	}
	if CardClass("", 0) != "cpu" {
		t.Errorf("no card is %q", CardClass("", 0))
	}
}

func TestUnreachableServerNamesTheAddress(t *testing.T) {
	port, err := runtimes.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Address: "127.0.0.1:" + strconv.Itoa(port), Spool: t.TempDir()}
	_, err = cfg.Dial(context.Background(), "test", nil)
	if err == nil || !strings.Contains(err.Error(), cfg.Address) || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("dialling nothing: %v", err)
	}
	if err := (Config{}).Check(); err == nil || !strings.Contains(err.Error(), "address") || !strings.Contains(err.Error(), "spool") {
		t.Errorf("an empty config: %v", err)
	}
}

// A merge retried after its coordinator died inside it (the trial's rows
// appended, its receipt not stored), with another trial merged meanwhile:
// the retried receipt's generation_sha256 is the record's sum right after
// its own rows (docs/receipts.md), not the whole record's, which covers the
// other trial's row too; and the record still checks against every
// receipt.
func TestRetriedMergeSumsThroughItsOwnRows(t *testing.T) {
	c, f, spool := mergeFixture(t)
	ctx := context.Background()
	first := writeEntry(t, spool, "w1", "Paris", nil)
	second := writeEntryOf(t, spool, studies.TrialKey{Arm: "a", JobKind: "qa", Task: "sum", Repeat: 1}, 1, "w1", "4", nil)
	execDir := f.ExecDir("s1", "exec-2")
	entry := layout.Records(filepath.Join(spool, "s1", "exec-2", "trials", first.Entry))
	if _, err := c.appendRows(execDir, "a", entry.TrialRecord()); err != nil {
		t.Fatal(err)
	}
	c.CloseRecords(execDir) // the coordinator dies here; its successor reopens the record
	if _, err := merge(t, c, second); err != nil {
		t.Fatal(err)
	}
	if m, err := merge(t, c, first); err != nil || m.Outcome != receipts.Scored {
		t.Fatalf("the retried merge: %+v, %v", m, err)
	}
	record := layout.Records(execDir).Generation("a")
	prefixes, whole, err := genrecord.LineSums(record)
	if err != nil {
		t.Fatal(err)
	}
	if len(prefixes) != 3 {
		t.Fatalf("%s has %d lines; want the header and two rows, none twice", record, len(prefixes))
	}
	got, err := f.st.Receipt(ctx, "exec-2", capitalKey, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.GenerationSHA256 != prefixes[1] {
		t.Errorf("the retried merge's generation_sha256 is %s; want %s, the record through its own row (the whole record's is %s)", got.GenerationSHA256, prefixes[1], whole)
	}
	rs, err := f.st.Receipts(ctx, "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := replay.CheckReceipts(record, replay.SumsOf(rs, "a")); err != nil {
		t.Errorf("the record against its receipts: %v", err)
	}
}
