package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
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
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/runtimes"
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
	} else if !strings.Contains(refusal(appErr.Message()), want) {
		t.Errorf("refused with %q; want the reason to say %q", err, want)
	} else {
		t.Logf("refused: %s", appErr.Message())
	}
	if rec, err := f.st.Receipt(context.Background(), "exec-2", rk, attempt); !errors.Is(err, receipts.ErrNotFound) {
		t.Errorf("a forged receipt is in the store: outcome %s grade %+v (%v)", rec.Outcome, rec.Grade, err)
	}
}

// refusal is the reason in a merge's refusal, without the spool entry's
// path it starts with: the path holds the test's name, which could say
// what the reason does not.
func refusal(msg string) string {
	if _, entry, ok := strings.Cut(msg, "/trials/"); ok {
		if _, reason, ok := strings.Cut(entry, ": "); ok {
			return reason
		}
	}
	return msg
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
	key := studies.TrialKey{Arm: "o", JobKind: "qa", Task: "capital", Repeat: 1}
	// The plan's receipt, as planReceipt makes it; an honest worker's
	// starts the same (run's newReceipt) and adds what its runtime reported.
	plan, err := run.UnrunReceipt("s1", snap, "exec-1", key, 1, 0, receipts.Preempted, "the plan's receipt")
	if err != nil {
		t.Fatal(err)
	}
	receipt := func(edit func(*receipts.Receipt)) receipts.Receipt {
		r := plan
		r.Pins = maps.Clone(plan.Pins)
		r.Outcome, r.HarnessVersion, r.Machine, r.GenerationSHA256 = receipts.Scored, "0.12", "test", strings.Repeat("e", 64)
		r.Pins["binary_sha256"], r.Pins["ollama_digest"] = binarySHA, strings.Repeat("f", 64)
		r.Grade = &receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "1"}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	design, err := snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkReceipt(receipt(nil), plan, snap, design); err != nil {
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
		if err := checkReceipt(receipt(tc.edit), plan, snap, design); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want refused naming %s", name, err, tc.want)
		}
	}
}

// Issue 43: a llama-server trial's receipt that says its harness is aider
// (whose grades the coordinator cannot recompute) with a wrong answer
// marked pass. The harness is the arm's, from the plan: the receipt is
// refused naming it, and the grade is re-graded whatever the receipt says.
func TestRedTeamForgedHarnessIsRefused(t *testing.T) {
	c, f, spool := mergeFixture(t)
	tr := writeEntry(t, spool, "w1", "Lyon", func(r *receipts.Receipt) {
		r.Harness = "aider"
		r.Grade = &receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "1"}
	})
	m, err := merge(t, c, tr)
	refused(t, f, capitalKey, 1, m, err, "harness")

	// Were the harness let through, the grade would not be: whether the
	// coordinator grades again goes by the arm's harness, not the receipt's.
	c, _, spool = mergeFixture(t)
	tr = writeEntry(t, spool, "w1", "Lyon", func(r *receipts.Receipt) {
		r.Harness = "aider"
		r.Grade = &receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "1"}
	})
	rec, entry := spoolReceipt(t, spool, tr)
	d, err := f.snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	key := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 1}
	if err := c.checkGrade(context.Background(), f.snap, d, key, rec, entry.TrialRecord(), true); err == nil || !strings.Contains(err.Error(), "re-grade") {
		t.Errorf("the grade of a llama-server trial whose receipt says aider: %v; want it graded again and refused", err)
	} else {
		t.Logf("checkGrade alone: %v", err)
	}
}

// spoolReceipt is the receipt a worker left in the spool, and its entry.
func spoolReceipt(t *testing.T, spool string, tr TrialResult) (receipts.Receipt, layout.Records) {
	t.Helper()
	entry := layout.Records(filepath.Join(spool, "s1", "exec-2", "trials", tr.Entry))
	raw, err := os.ReadFile(entry.Receipt())
	if err != nil {
		t.Fatal(err)
	}
	var rec receipts.Receipt
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	return rec, entry
}

// An Aider arm's grade is not computed again (its text is the last of
// several calls), but it still names the task's grader: the grader's name
// and version are held on every counted receipt. A wrong pass under the
// right grader is what stays the worker's word there.
func TestRedTeamAiderGradeNamesTheTasksGrader(t *testing.T) {
	c, f, spool := mergeFixture(t)
	d, err := f.snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	d.Arms[0].Runtime = "aider+llama-server"
	key := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 1}
	for name, tc := range map[string]struct {
		grade receipts.Grade
		want  string // empty: let through
	}{
		"another grader":         {receipts.Grade{Score: 1, Pass: true, Grader: "code", GraderVersion: "1"}, "grade.grader"},
		"another version":        {receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "3"}, "grade.grader_version"},
		"the task's, not graded": {receipts.Grade{Score: 1, Pass: true, Grader: "exact", GraderVersion: "1"}, ""},
	} {
		tr := writeEntry(t, spool, "w-"+strings.ReplaceAll(name, " ", "-"), "Lyon", func(r *receipts.Receipt) { r.Grade = &tc.grade })
		rec, entry := spoolReceipt(t, spool, tr)
		err := c.checkGrade(context.Background(), f.snap, d, key, rec, entry.TrialRecord(), true)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
}

// Every field of a receipt that the plan decides is the plan's: a worker
// that lies about any one (the rest of its receipt honest, its answer the
// right one) has the receipt refused, by the field's name. Its place in
// the plan comes from the execution's plan and store; its model, runtime,
// harness and the arm's and card's pins from the frozen arm (run's
// newReceipt, as the worker's runner fills them); the grader from the
// task in the frozen bank; the coordinator's own pins from no worker.
func TestRedTeamWorkerCannotLieAboutDerivableFields(t *testing.T) {
	pin := func(k, v string) func(*receipts.Receipt) { return func(r *receipts.Receipt) { r.Pins[k] = v } }
	for name, tc := range map[string]struct {
		attempt int // 1 unless set: earlier attempts are stored lost first
		edit    func(*receipts.Receipt)
		want    string
	}{
		"harness":         {edit: func(r *receipts.Receipt) { r.Harness = "aider" }, want: "harness"},
		"runtime":         {edit: func(r *receipts.Receipt) { r.Runtime = "ollama" }, want: "runtime"},
		"model name":      {edit: func(r *receipts.Receipt) { r.ModelName = "another/model" }, want: "model_name"},
		"model digest":    {edit: func(r *receipts.Receipt) { r.ModelDigest = strings.Repeat("d", 64) }, want: "model_digest"},
		"runtime binary":  {edit: pin("binary_sha256", strings.Repeat("e", 64)), want: "binary_sha256"},
		"quant":           {edit: pin("quant", "Q2_K"), want: "pins.quant"},
		"context":         {edit: pin("context", "131072"), want: "pins.context"},
		"slots":           {edit: pin("slots", "8"), want: "pins.slots"},
		"sampling":        {edit: pin("temperature", "0"), want: "pins.temperature"},
		"stop cap":        {edit: pin("stop_cap", "32768"), want: "pins.stop_cap"},
		"prompt format":   {edit: pin("prompt_format", "completion"), want: "pins.prompt_format"},
		"offload":         {edit: pin("gpu_layers", "99"), want: "pins.gpu_layers"},
		"card profile":    {edit: pin("card", "nvidia-h200"), want: "pins.card"},
		"card memory":     {edit: pin("card_memory_mib", "143771"), want: "pins.card_memory_mib"},
		"card simulated":  {edit: pin("card_simulated", "false"), want: "pins.card_simulated"},
		"study":           {edit: func(r *receipts.Receipt) { r.StudyID = "s2" }, want: "study_id"},
		"execution":       {edit: func(r *receipts.Receipt) { r.ExecutionID = "exec-1" }, want: "execution_id"},
		"design hash":     {edit: func(r *receipts.Receipt) { r.DesignHash = strings.Repeat("9", 64) }, want: "design_hash"},
		"arm":             {edit: func(r *receipts.Receipt) { r.Arm = "b" }, want: "arm"},
		"job kind":        {edit: func(r *receipts.Receipt) { r.JobKind = "other" }, want: "job_kind"},
		"task":            {edit: func(r *receipts.Receipt) { r.TaskID = "sum" }, want: "task_id"},
		"repeat":          {edit: func(r *receipts.Receipt) { r.Repeat = 2 }, want: "repeat"},
		"attempt":         {edit: func(r *receipts.Receipt) { r.Attempt, r.ParentAttempt = 2, 1 }, want: "attempt"},
		"parent attempt":  {attempt: 3, edit: func(r *receipts.Receipt) { r.ParentAttempt = 1 }, want: "parent_attempt"},
		"grader":          {edit: func(r *receipts.Receipt) { r.Grade.Grader = "regex" }, want: "grade.grader"},
		"grader version":  {edit: func(r *receipts.Receipt) { r.Grade.GraderVersion = "2" }, want: "grade.grader_version"},
		"worker pin":      {edit: pin("worker", "w9"), want: "pins.worker"},
		"spool digest":    {edit: pin("spool_record_sha256", strings.Repeat("f", 64)), want: "pins.spool_record_sha256"},
		"coordinator pin": {edit: pin("engine", "temporal"), want: "pins.engine"},
	} {
		t.Run(name, func(t *testing.T) {
			c, f, spool := mergeFixture(t)
			attempt := max(tc.attempt, 1)
			key := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 1}
			for a := 1; a < attempt; a++ {
				if _, err := c.RecordLost(context.Background(), LostAttempt{Study: "s1", Execution: "exec-2", Key: key.String(), Attempt: a, Parent: a - 1, Why: "lost"}); err != nil {
					t.Fatal(err)
				}
			}
			tr := writeEntryOf(t, spool, key, attempt, "w1", "Paris", tc.edit)
			m, err := merge(t, c, tr)
			refused(t, f, capitalKey, attempt, m, err, tc.want)
		})
	}
}

// An honest worker's receipt, made by the worker's own runner (run.Host,
// as rig worker runs it) with a stub in place of llama-server, is merged:
// every field the coordinator derives from the plan is the one the runner
// wrote, pins included. (The engine's run of the same is
// TestRedTeamForgingWorkerOnDevServer, which needs the provisioned tools.)
func TestMergeTakesAnHonestHostedReceipt(t *testing.T) {
	c, f, spool := mergeFixture(t)
	ctx := context.Background()
	bin, sum := stubFrozenBinary(t, &f, 1)
	launch := func(context.Context, runtimes.Build, runtimes.Config) (runtimes.Runtime, error) {
		return stubRuntime{pins: runtimes.Pins{Stack: runtimes.Stack{Runtime: "llama-server", RuntimeVersion: "b1", BinarySHA256: sum, Libraries: map[string]string{}},
			ModelName: "m", ModelSHA256: modelSHA, Machine: runtimes.Machine{CPU: "stub", Cores: 1}}, text: "Paris"}, nil
	}
	h, err := run.NewHost(run.Env{Gates: openGates{}, Installed: provision.Installed{LlamaServer: bin}, Launch: launch},
		run.HostSpec{Study: "s1", Snapshot: f.snap, Exec: receipts.Execution{ID: "exec-2"}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	key := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 1}
	entry := entryName(key.String(), 1, "w1")
	dir := layout.Records(filepath.Join(spool, "s1", "exec-2", "trials", entry))
	res, err := h.RunTrial(ctx, key, 1, 0, string(dir))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(res.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir.Receipt(), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	record, err := fileSHA256(dir.TrialRecord())
	if err != nil {
		t.Fatal(err)
	}
	tr := TrialResult{Study: "s1", Execution: "exec-2", Key: key.String(), Attempt: 1, Worker: "w1", Entry: entry,
		ReceiptSHA256: sha256Hex(raw), RecordSHA256: record, Outcome: res.Receipt.Outcome}
	if m, err := merge(t, c, tr); err != nil || m.Outcome != receipts.Scored {
		t.Fatalf("an honest worker's receipt: %+v, %v; its pins %v", m, err, res.Receipt.Pins)
	}
	if rec, err := f.st.Receipt(ctx, "exec-2", capitalKey, 1); err != nil || rec.Grade == nil || !rec.Grade.Pass || rec.Pins["card"] != "test-card" {
		t.Errorf("merged: %+v, %v", rec, err)
	}
}

// openGates are a governor that lets every trial run and preempts none.
type openGates struct{}

func (openGates) Ready(context.Context) error { return nil }
func (openGates) Watch(context.Context, string, *runtimes.Sandbox, uint64) (run.TrialGuard, error) {
	return openGuard{}, nil
}

type openGuard struct{}

func (openGuard) Preempted() <-chan struct{} { return nil }
func (openGuard) End() string                { return "" }

// stubRuntime answers every call with text, under the pins it is given.
type stubRuntime struct {
	pins runtimes.Pins
	text string
}

func (s stubRuntime) Name() string { return "llama-server" }
func (s stubRuntime) Generate(_ context.Context, req runtimes.Request) (runtimes.Result, error) {
	top := runtimes.Candidate{ID: -1, Text: s.text, Logprob: -0.1}
	return runtimes.Result{CallID: req.CallID, Text: s.text, StopReason: "stop", OutputTokens: 1,
		Steps: []runtimes.Step{{Candidate: top, Top: []runtimes.Candidate{top}}}}, nil
}
func (s stubRuntime) Pins() runtimes.Pins        { return s.pins }
func (s stubRuntime) Endpoint() string           { return "" }
func (s stubRuntime) Sandbox() *runtimes.Sandbox { return nil }
func (s stubRuntime) Stop(context.Context) error { return nil }

// stubFrozenBinary writes a stub llama-server and makes the fixture's
// snapshot run its first arm on it, at slots: the stub stands in for the
// frozen binary (its digest), the card is a real one (a simulated card would
// want a memory reservation of this machine), and top-K is the stub's one
// alternative per step. It returns the stub's path and digest.
func stubFrozenBinary(t *testing.T, f *fakeStudies, slots int) (bin, sum string) {
	t.Helper()
	bin = filepath.Join(t.TempDir(), "llama-server")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := fileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	d.CardProfile.Simulated = false
	d.TopK = 1
	if slots > 1 {
		d.Arms[0].Pins.Slots = slots
	}
	if f.snap.Design, err = json.Marshal(d); err != nil {
		t.Fatal(err)
	}
	f.snap.Arms[0].Binaries[0].SHA256 = sum
	return bin, sum
}
