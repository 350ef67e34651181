package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"rig/internal/layout"
	"rig/receipts"
	"rig/studies"
)

// The attacks of a worker that forges: anyone who can complete a trial
// activity on the cluster, or write the spool, tries to bring a counted
// receipt into the study's store that the trial never earned. Each must be
// refused as a mismatch (never merged, never retried) and leave the store
// without a receipt for the trial.

var capitalKey = receipts.TrialKey{Arm: "a", TaskID: "capital", Repeat: 1}

// refused asserts that a merge was refused as a non-retryable mismatch
// whose message says why (want), and that nothing was stored for rk.
func refused(t *testing.T, f fakeStudies, rk receipts.TrialKey, attempt int, m MergeResult, err error, want string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrMismatch || !appErr.NonRetryable() {
		t.Errorf("merged or not refused: %+v, %v; want a non-retryable %s", m, err, ErrMismatch)
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("refused with %q; want the reason to say %q", err, want)
	} else {
		t.Logf("refused: %s", appErr.Message())
	}
	if rec, err := f.st.Receipt(context.Background(), "exec-2", rk, attempt); !errors.Is(err, receipts.ErrNotFound) {
		t.Errorf("a forged receipt is in the store: outcome %s grade %+v (%v)", rec.Outcome, rec.Grade, err)
	}
}

// A worker says it passed: its own record holds the wrong answer, and the
// bank's exact grader says it fails.
func TestRedTeamForgedGradeIsRefused(t *testing.T) {
	c, f, spool := mergeFixture(t)
	tr := writeEntry(t, spool, "w1", "Lyon", func(r *receipts.Receipt) {
		r.Grade = &receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "1"}
	})
	m, err := merge(t, c, tr)
	refused(t, f, capitalKey, 1, m, err, "grade")
}

// The model and binary digests are checked on every receipt: an
// ollama_digest pin does not excuse another model, and a missing binary
// pin is not a match.
func TestRedTeamDigestsAreAlwaysChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*receipts.Receipt)
		want string
	}{
		"other model with an ollama pin": {func(r *receipts.Receipt) {
			r.ModelDigest = strings.Repeat("d", 64)
			r.Pins["ollama_digest"] = strings.Repeat("d", 64)
		}, "model_digest"},
		"no binary pin": {func(r *receipts.Receipt) { delete(r.Pins, "binary_sha256") }, "binary_sha256"},
		// Not a digest, but the same test's shape: the receipt's job kind
		// is the planned key's, so the grade is checked against its bank.
		"another job kind": {func(r *receipts.Receipt) { r.JobKind = "other" }, "job_kind"},
	} {
		t.Run(name, func(t *testing.T) {
			c, f, spool := mergeFixture(t)
			tr := writeEntry(t, spool, "w1", "Paris", tc.edit)
			m, err := merge(t, c, tr)
			refused(t, f, capitalKey, 1, m, err, tc.want)
		})
	}
}

// The trial key, the attempt and the entry's name are the coordinator's
// own: a key its plan does not hold, an attempt its store does not expect,
// and an entry named for another worker (or another attempt) are refused.
func TestRedTeamKeyAttemptAndEntryAreThePlans(t *testing.T) {
	c, f, spool := mergeFixture(t)
	notPlanned := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 7}
	tr := writeEntryOf(t, spool, notPlanned, 1, "w1", "Paris", nil)
	m, err := merge(t, c, tr)
	refused(t, f, receipts.TrialKey{Arm: "a", TaskID: "capital", Repeat: 7}, 1, m, err, "not in the execution's plan")

	capital := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 1}
	tr = writeEntryOf(t, spool, capital, 9, "w1", "Paris", nil)
	m, err = merge(t, c, tr)
	refused(t, f, capitalKey, 9, m, err, "attempt 9")

	// w2's entry, returned as w1's: the receipt would be credited to w1.
	tr = writeEntry(t, spool, "w2", "Paris", nil)
	tr.Worker = "w1"
	m, err = merge(t, c, tr)
	refused(t, f, capitalKey, 1, m, err, "entry name")
}

// Anyone who can write the spool plants a whole, self-consistent entry the
// engine never reported: a second pass over the spool must not merge it.
func TestRedTeamPlantedSpoolEntryIsNotRemerged(t *testing.T) {
	c, f, spool := mergeFixture(t)
	planted := writeEntry(t, spool, "w9", "Paris", nil)
	sum, err := c.Remerge(context.Background(), "s1", "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Merged != 0 || len(sum.Refused) != 1 || !strings.Contains(sum.Refused[0], planted.Entry) {
		t.Errorf("remerge of a planted entry: %+v; want nothing merged and %s refused by name", sum, planted.Entry)
	}
	if rec, err := f.st.Receipt(context.Background(), "exec-2", capitalKey, 1); !errors.Is(err, receipts.ErrNotFound) {
		t.Errorf("the planted receipt is in the store: %s (%v)", rec.Outcome, err)
	}
	// The same attempt lost in the engine: the recovery path does not take
	// the planted entry as the finished attempt either.
	lm, err := c.RecordLost(context.Background(), LostAttempt{Study: "s1", Execution: "exec-2", Key: planted.Key, Attempt: 1, Why: "heartbeat timeout"})
	if err != nil || lm.Outcome != receipts.Preempted {
		t.Errorf("the lost attempt: %+v, %v; want it recorded preempted, the planted entry not merged", lm, err)
	}
}

// What an honest worker returns through the activity is merged, and a
// second pass over the spool finds it merged; a failed_at_card receipt
// (its runtime never started, so it has no binary pin) is merged too.
func TestMergeTrustsWhatTheActivityReported(t *testing.T) {
	c, f, spool := mergeFixture(t)
	tr := writeEntry(t, spool, "w1", "Lyon", nil)
	if m, err := c.Merge(context.Background(), tr); err != nil || m.Outcome != receipts.Scored {
		t.Fatalf("an honest failing answer: %+v, %v", m, err)
	}
	rec, err := f.st.Receipt(context.Background(), "exec-2", capitalKey, 1)
	if err != nil || rec.Grade == nil || rec.Grade.Pass {
		t.Fatalf("merged receipt: %+v, %v", rec.Grade, err)
	}
	sum, err := c.Remerge(context.Background(), "s1", "exec-2")
	if err != nil || sum.Already != 1 || sum.Merged != 0 || len(sum.Refused) != 0 {
		t.Errorf("remerge after the engine's merge: %+v, %v; want it already merged", sum, err)
	}
	// A reported entry edited in the spool afterwards: named, not merged.
	planted := layout.Records(filepath.Join(spool, "s1", "exec-2", "trials", tr.Entry)).Receipt()
	if err := os.WriteFile(planted, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum, err := c.Remerge(context.Background(), "s1", "exec-2"); err != nil || sum.Already != 0 || len(sum.Refused) != 1 || !strings.Contains(sum.Refused[0], "sha256") {
		t.Errorf("remerge of a reported entry edited since: %+v, %v; want it refused by name for its digest", sum, err)
	}

	// A recovered merge: the engine reported the entry, the merge found it
	// cut (the spool's copy still arriving), the workflow records the
	// attempt lost; by then the entry is whole, and it is merged, not rerun.
	sumKey := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "sum", Repeat: 1}
	tr = writeEntryOf(t, spool, sumKey, 1, "w2", "5", nil)
	path := layout.Records(filepath.Join(spool, "s1", "exec-2", "trials", tr.Entry)).Receipt()
	whole, _ := os.ReadFile(path)
	os.WriteFile(path, whole[:len(whole)/2], 0o644)
	if _, err := c.Merge(context.Background(), tr); err == nil {
		t.Fatal("a cut entry was merged")
	}
	os.WriteFile(path, whole, 0o644)
	lm, err := c.RecordLost(context.Background(), LostAttempt{Study: "s1", Execution: "exec-2", Key: tr.Key, Attempt: 1, Why: "its spool entry could not be brought in"})
	if err != nil || lm.Outcome != receipts.Scored || lm.Already {
		t.Errorf("the recovered merge: %+v, %v; want the finished entry merged (scored), not a lost attempt", lm, err)
	}
	if rec, err := f.st.Receipt(context.Background(), "exec-2", receipts.TrialKey{Arm: "a", TaskID: "sum", Repeat: 1}, 1); err != nil || rec.Pins["worker"] != "w2" {
		t.Errorf("the recovered merge stored %+v, %v", rec.Pins["worker"], err)
	}

	second := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 2}
	tr = writeEntryOf(t, spool, second, 1, "w1", "", func(r *receipts.Receipt) {
		r.Outcome, r.Grade, r.Detail = receipts.FailedAtCard, &receipts.Grade{Grader: "budget", GraderVersion: "1"}, "blew the card's memory budget while loading the model"
		delete(r.Pins, "binary_sha256")
	})
	if m, err := c.Merge(context.Background(), tr); err != nil || m.Outcome != receipts.FailedAtCard {
		t.Errorf("a failed_at_card receipt without a binary pin: %+v, %v", m, err)
	}
}

// On the real engine, a worker that forges a pass on one task among honest
// answers: its receipts are refused at every attempt (the trial ends in an
// error receipt, rerun later by rig study rerun), the honest trials are
// merged, and the reported digests are logged beside the execution.
func TestRedTeamForgingWorkerOnDevServer(t *testing.T) {
	c, f, spool := mergeFixture(t)
	ctx := context.Background()
	s := startDevServer(t)
	cl, err := Config{Address: s.Address(), Spool: spool}.Dial(ctx, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c.client, c.queue = cl, "rig.test.coordinator"
	d, err := f.snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	queue := Queue("llama-server", binarySHA, ArmCardClass(d, *d.Arm("a")))
	var mu sync.Mutex
	forged := 0
	forger := func(ctx context.Context, in TrialInput) (TrialResult, error) {
		key, err := studies.ParseTrialKey(in.Key)
		if err != nil {
			return TrialResult{}, err
		}
		if key.Task == "sum" {
			return writeEntryOf(t, spool, key, in.Attempt, "w1", "4", nil), nil
		}
		mu.Lock()
		forged++
		mu.Unlock()
		return writeEntryOf(t, spool, key, in.Attempt, "w1", "Lyon", func(r *receipts.Receipt) {
			r.Grade = &receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "1"}
		}), nil
	}
	cw := worker.New(cl, c.queue, worker.Options{})
	RegisterCoordinator(cw, c)
	tw := worker.New(cl, queue, worker.Options{DisableWorkflowWorker: true})
	RegisterTrialActivity(tw, forger)
	for _, w := range []worker.Worker{cw, tw} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	in := StudyInput{Study: "s1", Execution: "exec-2", DesignHash: f.snap.DesignHash, Coordinator: c.queue, Chunk: 10, InFlight: 4, ChunksAtOnce: 1, StartWait: time.Minute}
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(in.Study, in.Execution), TaskQueue: c.queue}, StudyWorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var res StudyResult
	if err := wr.Get(wctx, &res); err != nil {
		t.Fatal(err)
	}
	counted, err := f.st.Counted(ctx, "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range counted {
		if k.TaskID == "capital" {
			t.Errorf("a forged receipt was counted: %s attempt %d grade %+v", k, r.Attempt, r.Grade)
		}
	}
	if len(counted) != 2 || res.Counted != 2 || res.Errors != 2 {
		t.Errorf("%d counted receipts, result %+v; want the two honest sum trials counted and the two forged ones in error", len(counted), res)
	}
	mu.Lock()
	t.Logf("forged attempts: %d, result %+v", forged, res)
	mu.Unlock()
	log, err := os.ReadFile(layout.Records(filepath.Join(f.dir, "exec-2")).Reported())
	if err != nil || strings.Count(string(log), "\n") < 2+forged {
		t.Errorf("reported.jsonl holds %d lines (%v); want one per returned entry (%d)", strings.Count(string(log), "\n"), err, 2+forged)
	}
}

// What a legitimate Ollama receipt carries: the frozen GGUF's sha256 as
// its model digest (Ollama's blob is the file's digest), the frozen
// binary, and the manifest digest a started Ollama reports. Without the
// manifest digest it is not a started Ollama's; with one other than the
// design pins, another model.
func TestCheckReceiptOfAnOllamaArm(t *testing.T) {
	arm := studies.Arm{Name: "o", Role: studies.RoleIncumbent, Runtime: "ollama", Model: studies.Model{OllamaDigest: "sha256:" + strings.Repeat("f", 64)}}
	component, _ := (&studies.Snapshot{}).ArmRuntime(arm)
	d := &studies.Design{Name: "s1", Repeats: 1, Arms: []studies.Arm{arm}}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	snap := &studies.Snapshot{DesignHash: strings.Repeat("5", 64), Design: raw,
		Arms: []studies.FrozenArm{{Name: "o", ModelSHA256: modelSHA, Binaries: []studies.Binary{{Component: component, SHA256: binarySHA}}}}}
	rk := receipts.TrialKey{Arm: "o", TaskID: "capital", Repeat: 1}
	receipt := func(edit func(*receipts.Receipt)) receipts.Receipt {
		r := receipts.Receipt{SchemaVersion: receipts.SchemaVersion, StudyID: "s1", ExecutionID: "exec-1", DesignHash: snap.DesignHash,
			Arm: "o", JobKind: "qa", TaskID: "capital", Repeat: 1, Attempt: 1, Outcome: receipts.Scored, ModelName: "m", ModelDigest: modelSHA,
			Runtime: "ollama", Harness: "ollama", HarnessVersion: "0.12", Machine: "test", GenerationSHA256: strings.Repeat("e", 64),
			Pins:  map[string]string{"binary_sha256": binarySHA, "ollama_digest": strings.Repeat("f", 64), "quant": "Q8_0"},
			Grade: &receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "1"}}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	design, err := snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkReceipt(receipt(nil), snap, design, "s1", "exec-1", rk, 1); err != nil {
		t.Errorf("a legitimate Ollama receipt: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*receipts.Receipt)
		want string
	}{
		"no manifest digest":    {func(r *receipts.Receipt) { delete(r.Pins, "ollama_digest") }, "ollama_digest"},
		"another manifest":      {func(r *receipts.Receipt) { r.Pins["ollama_digest"] = strings.Repeat("0", 64) }, "model.ollama_digest"},
		"another model, pinned": {func(r *receipts.Receipt) { r.ModelDigest = strings.Repeat("d", 64) }, "model_digest"},
		"another binary":        {func(r *receipts.Receipt) { r.Pins["binary_sha256"] = strings.Repeat("e", 64) }, "binary_sha256"},
	} {
		if err := checkReceipt(receipt(tc.edit), snap, design, "s1", "exec-1", rk, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want refused naming %s", name, err, tc.want)
		}
	}
}
