package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/internal/offload"
	"rig/receipts"
	"rig/studies"
	"rig/studies/run"
)

// Studies is what the coordinator needs of the daemon that owns the stores.
type Studies interface {
	Snapshot(study string) (*studies.Snapshot, error)
	// Store is the study's open store.
	Store(study string) (*receipts.Store, error)
	// ExecDir is the execution's folder (plan, generation records, repos).
	ExecDir(study, execution string) string
}

// Coordinator is the daemon's side of scale-out: it submits executions as
// workflows and runs the activities that touch the study's store (plan,
// chunk, merge, lost attempts) on its own task queue.
type Coordinator struct {
	cfg     Config
	client  client.Client
	studies Studies
	queue   string
	log     *slog.Logger
	worker  worker.Worker

	mu      sync.Mutex // one merge at a time: records are appended in order
	writers map[string]*genrecord.Writer

	followMu sync.Mutex
	follows  map[string]*Handle // by WorkflowID: the executions followed now
}

func (c *Coordinator) follow(study, execution string, h *Handle) {
	c.followMu.Lock()
	defer c.followMu.Unlock()
	if c.follows == nil {
		c.follows = map[string]*Handle{}
	}
	c.follows[WorkflowID(study, execution)] = h
}

func (c *Coordinator) unfollow(study, execution string) {
	c.followMu.Lock()
	defer c.followMu.Unlock()
	delete(c.follows, WorkflowID(study, execution))
}

// stored tells the execution's handle, if one follows it, of a receipt.
func (c *Coordinator) stored(rec receipts.Receipt) {
	c.followMu.Lock()
	h := c.follows[WorkflowID(rec.StudyID, rec.ExecutionID)]
	c.followMu.Unlock()
	if h != nil {
		h.note(rec)
	}
}

// CoordinatorQueue is the coordinator's task queue: one per daemon home, so
// a workflow submitted before a restart finds the same daemon after it.
func CoordinatorQueue(home string) string {
	h, _ := os.Hostname()
	return "rig.coordinator." + h + "." + shortHash(home)
}

// NewCoordinator dials the cluster and starts the coordinator's worker.
func NewCoordinator(ctx context.Context, cfg Config, home string, st Studies, log *slog.Logger) (*Coordinator, error) {
	if log == nil {
		log = slog.Default()
	}
	queue := CoordinatorQueue(home)
	cl, err := cfg.Dial(ctx, queue, log)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, client: cl, studies: st, queue: queue, log: log, writers: map[string]*genrecord.Writer{}}
	w := worker.New(cl, queue, worker.Options{})
	RegisterWorkflows(w)
	w.RegisterActivityWithOptions(c.plan, activity.RegisterOptions{Name: actPlan})
	w.RegisterActivityWithOptions(c.chunk, activity.RegisterOptions{Name: actChunk})
	w.RegisterActivityWithOptions(c.merge, activity.RegisterOptions{Name: actMerge})
	w.RegisterActivityWithOptions(c.recordLost, activity.RegisterOptions{Name: actRecordLost})
	if err := w.Start(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("starting the coordinator's worker on %s: %w", queue, err)
	}
	c.worker = w
	return c, nil
}

// RegisterWorkflows registers rig's workflows with a Temporal worker.
func RegisterWorkflows(w worker.Worker) {
	w.RegisterWorkflowWithOptions(StudyWorkflow, workflow.RegisterOptions{Name: StudyWorkflowName})
	w.RegisterWorkflowWithOptions(ChunkWorkflow, workflow.RegisterOptions{Name: ChunkWorkflowName})
	w.RegisterWorkflowWithOptions(ReplayWorkflow, workflow.RegisterOptions{Name: ReplayWorkflowName})
}

// Close stops the coordinator's worker and closes the record writers.
func (c *Coordinator) Close() {
	c.worker.Stop()
	c.client.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, w := range c.writers {
		w.Close()
		delete(c.writers, p)
	}
}

// Client is the coordinator's Temporal client.
func (c *Coordinator) Client() client.Client { return c.client }

// Queue is the coordinator's task queue.
func (c *Coordinator) Queue() string { return c.queue }

// CheckDesign refuses what this engine does not run yet, before anything is
// submitted: judge phases, card sub-studies and stopping rules run on the
// daemon's own card.
func CheckDesign(d *studies.Design) error {
	for _, jk := range d.JobKinds {
		if jk.Grader.Name == studies.JudgeGrader {
			return fmt.Errorf("job kind %s is judged: the temporal engine does not run judge phases yet; run this study on the daemon's own card (rig study run without --engine)", jk.Name)
		}
	}
	if d.Stopping != nil {
		// The engine runs chunks of trials on many workers at once, with no
		// check between blocks: it would run every trial and report a
		// study that claims a stopping rule it never applied.
		return errors.New("design field stopping: the temporal engine does not check a stopping rule between blocks yet; run this study on the daemon's own card (rig study run without --engine), or remove stopping from the design")
	}
	if d.IsCardStudy() {
		return errors.New("a card sub-study holds each arm to simulated cards on one machine: run it on the daemon's own card (rig study run without --engine)")
	}
	return nil
}

// Submit starts the execution's workflow, or finds the one already started
// with the same id: a second submit of the same execution is the same run.
func (c *Coordinator) Submit(ctx context.Context, study string, snap *studies.Snapshot, e receipts.Execution) error {
	d, err := snap.DesignValue()
	if err != nil {
		return err
	}
	if err := CheckDesign(d); err != nil {
		return err
	}
	in := StudyInput{Study: study, Execution: e.ID, DesignHash: snap.DesignHash, Coordinator: c.queue,
		Chunk: DefaultChunk, InFlight: DefaultInFlight, ChunksAtOnce: 2}
	_, err = c.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: WorkflowID(study, e.ID), TaskQueue: c.queue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, StudyWorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("submitting %s to temporal at %s: %w", WorkflowID(study, e.ID), c.cfg.Address, err)
	}
	return nil
}

func (c *Coordinator) load(study, execution string) (*studies.Snapshot, *studies.Design, *receipts.Store, receipts.Execution, error) {
	snap, err := c.studies.Snapshot(study)
	if err != nil {
		return nil, nil, nil, receipts.Execution{}, err
	}
	d, err := snap.DesignValue()
	if err != nil {
		return nil, nil, nil, receipts.Execution{}, err
	}
	st, err := c.studies.Store(study)
	if err != nil {
		return nil, nil, nil, receipts.Execution{}, err
	}
	e, err := st.Execution(context.Background(), execution)
	if err != nil {
		return nil, nil, nil, receipts.Execution{}, err
	}
	return snap, d, st, e, nil
}

func (c *Coordinator) planOf(study, execution string) (*studies.Plan, *studies.Snapshot, *studies.Design, *receipts.Store, error) {
	snap, d, st, e, err := c.load(study, execution)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	plan, err := studies.NewPlan(d, snap.Tasks(), studies.PlanOptions{Seed: int64(e.PlanSeed)})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return plan, snap, d, st, nil
}

// plan lays out the execution's plan, records it, and publishes the
// snapshot and banks to the spool for the workers.
func (c *Coordinator) plan(ctx context.Context, in StudyInput) (PlanInfo, error) {
	if in.NoModel {
		size := max(in.Chunk, 1)
		return PlanInfo{Trials: in.Synthetic, Chunks: (in.Synthetic + size - 1) / size}, nil
	}
	plan, snap, _, _, err := c.planOf(in.Study, in.Execution)
	if err != nil {
		return PlanInfo{}, err
	}
	if snap.DesignHash != in.DesignHash {
		return PlanInfo{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("study %s: the frozen design is %s, the workflow's %s", in.Study, snap.DesignHash, in.DesignHash), ErrMismatch, nil)
	}
	dir := c.studies.ExecDir(in.Study, in.Execution)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return PlanInfo{}, err
	}
	if err := atomicfile.WriteJSON(layout.Records(dir).Plan(), plan, 0o600); err != nil {
		return PlanInfo{}, err
	}
	if err := publish(c.cfg.Spool, in.Study, in.Execution, snap); err != nil {
		return PlanInfo{}, err
	}
	size := max(in.Chunk, 1)
	return PlanInfo{Trials: len(plan.Trials), Chunks: (len(plan.Trials) + size - 1) / size}, nil
}

// chunk is one chunk's trials, each with its queue and next attempt.
func (c *Coordinator) chunk(ctx context.Context, in ChunkInput) ([]PlannedTrial, error) {
	if in.NoModel {
		size := max(in.Chunk, 1)
		var out []PlannedTrial
		for i := in.Index * size; i < min((in.Index+1)*size, in.Synthetic); i++ {
			out = append(out, PlannedTrial{Key: fmt.Sprintf("no-model/scheduling/t%07d/1", i), Queue: in.NoModelQueue, Attempt: 1})
		}
		return out, nil
	}
	plan, snap, d, st, err := c.planOf(in.Study, in.Execution)
	if err != nil {
		return nil, err
	}
	size := max(in.Chunk, 1)
	lo, hi := in.Index*size, min((in.Index+1)*size, len(plan.Trials))
	if lo >= hi {
		return nil, nil
	}
	counted, err := st.Counted(ctx, in.Execution)
	if err != nil {
		return nil, err
	}
	var out []PlannedTrial
	for _, t := range plan.Trials[lo:hi] {
		rk := receipts.TrialKey{Arm: t.Key.Arm, TaskID: t.Key.Task, Repeat: t.Key.Repeat}
		pt := PlannedTrial{Key: t.Key.String()}
		if _, ok := counted[rk]; ok {
			pt.Done = true
			out = append(out, pt)
			continue
		}
		if pt.Attempt, pt.Parent, err = st.NextAttempt(ctx, in.Execution, rk); err != nil {
			return nil, err
		}
		arm := d.Arm(t.Key.Arm)
		fa, ok := snap.Arm(t.Key.Arm)
		if arm == nil || !ok {
			return nil, fmt.Errorf("trial %s: arm %s is not in the snapshot", t.Key, t.Key.Arm)
		}
		pt.Runtime = offload.Component(studies.BaseRuntime(arm.Runtime), arm.Pins.Offload.Backend)
		for _, b := range fa.Binaries {
			if b.Component == pt.Runtime {
				pt.BinarySHA256 = b.SHA256
			}
		}
		pt.ModelSHA256 = fa.ModelSHA256
		pt.Queue = Queue(pt.Runtime, pt.BinarySHA256, ArmCardClass(d, *arm))
		out = append(out, pt)
	}
	return out, nil
}

// merge brings one trial attempt's spool entry into the store, exactly once
// per key and attempt: the same receipt twice is a no-op, and a different
// receipt for a key and attempt already merged is kept as a divergent
// duplicate and never overwrites the first.
func (c *Coordinator) merge(ctx context.Context, tr TrialResult) (MergeResult, error) {
	key, err := studies.ParseTrialKey(tr.Key)
	if err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrMismatch, nil)
	}
	return c.MergeEntry(ctx, tr.Study, tr.Execution, key, tr)
}

// MergeEntry is merge without the engine: what `rig worker merge` and the
// tests call on a spool entry.
func (c *Coordinator) MergeEntry(ctx context.Context, study, execution string, key studies.TrialKey, tr TrialResult) (MergeResult, error) {
	snap, err := c.studies.Snapshot(study)
	if err != nil {
		return MergeResult{}, err
	}
	st, err := c.studies.Store(study)
	if err != nil {
		return MergeResult{}, err
	}
	x, err := execSpool(c.cfg.Spool, study, execution)
	if err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrMismatch, err)
	}
	// The entry's name is the worker's word: checked before it is a path.
	dir, err := x.Entry(tr.Entry)
	if err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrMismatch, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, receiptFile))
	if err != nil {
		return MergeResult{}, spoolError("spool entry %s: %v", dir, err)
	}
	if got := sha256Hex(raw); got != tr.ReceiptSHA256 {
		return MergeResult{}, spoolError("spool entry %s: receipt.json has sha256 %s, the worker sent %s (an incomplete transfer or an edited file: not merged)", dir, got, tr.ReceiptSHA256)
	}
	var rec receipts.Receipt
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spool entry %s: receipt.json: %v", dir, err), ErrMismatch, nil)
	}
	rk := receipts.TrialKey{Arm: key.Arm, TaskID: key.Task, Repeat: key.Repeat}
	if err := checkReceipt(rec, snap, study, execution, rk, tr.Attempt); err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spool entry %s: %v", dir, err), ErrMismatch, err)
	}
	recordPath := filepath.Join(dir, run.RecordFile)
	if tr.RecordSHA256 != "" {
		got, err := fileSHA256(recordPath)
		if err != nil {
			return MergeResult{}, spoolError("spool entry %s: %v", dir, err)
		}
		if got != tr.RecordSHA256 || got != rec.GenerationSHA256 {
			return MergeResult{}, spoolError("spool entry %s: %s has sha256 %s, the worker sent %s and its receipt says %s (not merged)", dir, run.RecordFile, got, tr.RecordSHA256, rec.GenerationSHA256)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, err := st.Receipt(ctx, execution, rk, tr.Attempt); err == nil {
		if old.Pins["spool_receipt_sha256"] == tr.ReceiptSHA256 {
			return MergeResult{Outcome: string(old.Outcome), Already: true}, nil
		}
		if err := st.PutDivergent(ctx, receipts.Divergent{Receipt: rec, Digest: tr.ReceiptSHA256, Worker: tr.Worker}); err != nil {
			return MergeResult{}, err
		}
		c.log.Warn("divergent duplicate kept apart", "study", study, "trial", key.String(), "attempt", tr.Attempt, "worker", tr.Worker)
		return MergeResult{Outcome: string(old.Outcome), Divergent: true}, nil
	} else if !errors.Is(err, receipts.ErrNotFound) {
		return MergeResult{}, err
	}
	execDir := c.studies.ExecDir(study, execution)
	if tr.RecordSHA256 != "" {
		sum, err := c.appendRows(execDir, rec.Arm, recordPath)
		if err != nil {
			return MergeResult{}, err
		}
		rec.GenerationSHA256 = sum
	}
	if err := copyRepos(filepath.Join(dir, "repos"), filepath.Join(execDir, "repos")); err != nil {
		return MergeResult{}, err
	}
	if rec.Pins == nil {
		rec.Pins = map[string]string{}
	}
	rec.Pins["worker"] = tr.Worker
	rec.Pins["spool_receipt_sha256"] = tr.ReceiptSHA256
	if tr.RecordSHA256 != "" {
		rec.Pins["spool_record_sha256"] = tr.RecordSHA256
	}
	if err := st.PutReceipt(ctx, rec); err != nil {
		return MergeResult{}, err
	}
	c.stored(rec)
	return MergeResult{Outcome: string(rec.Outcome)}, nil
}

// checkReceipt holds a worker's receipt to the frozen snapshot.
func checkReceipt(rec receipts.Receipt, snap *studies.Snapshot, study, execution string, rk receipts.TrialKey, attempt int) error {
	fa, ok := snap.Arm(rk.Arm)
	switch {
	case rec.StudyID != study || rec.ExecutionID != execution:
		return fmt.Errorf("the receipt is of %s/%s, not %s/%s", rec.StudyID, rec.ExecutionID, study, execution)
	case rec.DesignHash != snap.DesignHash:
		return fmt.Errorf("design_hash %s is not the frozen design's %s", rec.DesignHash, snap.DesignHash)
	case rec.Trial() != rk || rec.Attempt != attempt:
		return fmt.Errorf("the receipt is of trial %s attempt %d, not %s attempt %d", rec.Trial(), rec.Attempt, rk, attempt)
	case !ok:
		return fmt.Errorf("arm %s is not in the snapshot", rk.Arm)
	case rec.Outcome != receipts.FailedAtCard && rec.ModelDigest != fa.ModelSHA256 && rec.Pins["ollama_digest"] == "":
		return fmt.Errorf("model_digest %s is not the frozen model's %s", rec.ModelDigest, fa.ModelSHA256)
	}
	if got := rec.Pins["binary_sha256"]; got != "" {
		for _, b := range fa.Binaries {
			if b.Component == offload.Component(rec.Runtime, fa.Pins.Offload.Backend) && b.SHA256 != got {
				return fmt.Errorf("pins.binary_sha256 %s is not the frozen %s binary's %s", got, b.Component, b.SHA256)
			}
		}
	}
	return rec.Validate()
}

// appendRows appends a trial's own record to its arm's record of the
// execution (rows already there are skipped: a retried merge) and returns
// the arm record's sum, which the receipt then vouches for. A record made
// on another stack (a worker with another machine line) goes to its own
// file, since one record holds one stack.
func (c *Coordinator) appendRows(execDir, arm, recordPath string) (string, error) {
	rd, err := genrecord.OpenReader(recordPath)
	if err != nil {
		return "", err
	}
	defer rd.Close()
	pins := rd.Header().Pins
	if err := os.MkdirAll(execDir, 0o700); err != nil {
		return "", err
	}
	path := layout.Records(execDir).Generation(arm)
	w, err := c.writer(path, pins)
	if errors.Is(err, genrecord.ErrPinsDiffer) {
		path = layout.Records(execDir).GenerationOn(arm, shortHash(pins.MachineLine+pins.BinarySHA256))
		w, err = c.writer(path, pins)
	}
	if err != nil {
		return "", err
	}
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		if w.Has(row.RowID) {
			continue
		}
		if err := w.Append(row); err != nil {
			return "", err
		}
	}
	return w.Sum(), nil
}

func (c *Coordinator) writer(path string, pins genrecord.Pins) (*genrecord.Writer, error) {
	if w, ok := c.writers[path]; ok {
		return w, nil
	}
	w, err := genrecord.OpenWriter(path, pins)
	if err != nil {
		return nil, err
	}
	c.writers[path] = w
	return w, nil
}

// CloseRecords closes the record writers of an execution that ended.
func (c *Coordinator) CloseRecords(execDir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, w := range c.writers {
		if filepath.Dir(p) == execDir {
			w.Close()
			delete(c.writers, p)
		}
	}
}

// recordLost writes the receipt of an attempt no worker returned. When a
// worker did finish it (its result was lost on the way: the engine was
// down, say) and left a whole spool entry, that entry is merged instead,
// so the trial is not run again.
func (c *Coordinator) recordLost(ctx context.Context, l LostAttempt) (MergeResult, error) {
	snap, _, st, _, err := c.load(l.Study, l.Execution)
	if err != nil {
		return MergeResult{}, err
	}
	key, err := studies.ParseTrialKey(l.Key)
	if err != nil {
		return MergeResult{}, err
	}
	rk := receipts.TrialKey{Arm: key.Arm, TaskID: key.Task, Repeat: key.Repeat}
	if r, err := st.Receipt(ctx, l.Execution, rk, l.Attempt); err == nil {
		return MergeResult{Outcome: string(r.Outcome), Already: true}, nil // recorded before a retry of this activity
	}
	if !l.Final {
		if m, ok, err := c.mergeFinished(ctx, l.Study, l.Execution, key, l.Attempt); err != nil || ok {
			return m, err
		}
	}
	outcome, detail := receipts.Preempted, "worker lost mid-trial, rerun as the next attempt: "+l.Why
	if l.Final {
		outcome, detail = receipts.Error, "no worker returned this trial, so it is not scored (rig study rerun retries it): "+l.Why
	}
	rec, err := run.UnrunReceipt(l.Study, snap, l.Execution, key, l.Attempt, l.Parent, outcome, detail)
	if err != nil {
		return MergeResult{}, err
	}
	rec.Pins["engine"] = "temporal"
	c.log.Info("attempt lost", "study", l.Study, "trial", l.Key, "attempt", l.Attempt, "why", l.Why)
	if err := st.PutReceipt(ctx, rec); err != nil {
		return MergeResult{}, err
	}
	c.stored(rec)
	return MergeResult{Outcome: string(rec.Outcome)}, nil
}

// mergeFinished merges a whole spool entry of the attempt, if a worker left
// one although its result never reached the engine. Its digests did not
// travel, so the entry is held to its own receipt: the record's sha256 must
// be the receipt's.
func (c *Coordinator) mergeFinished(ctx context.Context, study, execution string, key studies.TrialKey, attempt int) (MergeResult, bool, error) {
	x, err := execSpool(c.cfg.Spool, study, execution)
	if err != nil {
		return MergeResult{}, false, err
	}
	dir := x.Trials()
	prefix := strings.TrimSuffix(entryName(key.String(), attempt, "x"), "x")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return MergeResult{}, false, nil
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) || strings.HasSuffix(e.Name(), partial) {
			continue
		}
		_, _, worker, err := parseEntryName(e.Name())
		if err != nil {
			continue
		}
		tr := TrialResult{Key: key.String(), Attempt: attempt, Worker: worker, Entry: e.Name()}
		if tr.ReceiptSHA256, err = fileSHA256(filepath.Join(dir, e.Name(), receiptFile)); err != nil {
			continue
		}
		if s, err := fileSHA256(filepath.Join(dir, e.Name(), run.RecordFile)); err == nil {
			tr.RecordSHA256 = s
		}
		m, err := c.MergeEntry(ctx, study, execution, key, tr)
		if err != nil {
			c.log.Warn("a finished spool entry of a lost attempt could not be merged", "entry", e.Name(), "err", err)
			continue
		}
		c.log.Info("a lost attempt had finished: merged from the spool", "study", study, "trial", key.String(), "attempt", attempt, "worker", worker)
		return m, true, nil
	}
	return MergeResult{}, false, nil
}

// copyRepos copies a spool entry's kept repositories into the execution.
func copyRepos(from, to string) error {
	ents, err := os.ReadDir(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := atomicfile.WriteBytes(filepath.Join(to, e.Name()), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// RemergeSummary is what a second pass over an execution's spool did.
type RemergeSummary struct {
	Entries   int `json:"entries"`
	Merged    int `json:"merged"`
	Already   int `json:"already"`
	Divergent int `json:"divergent"`
	// Partial counts entries a worker never finished (a .partial folder):
	// never merged.
	Partial int `json:"partial"`
}

// Remerge brings every finished spool entry of an execution in again. It
// is idempotent: entries already merged are no-ops, so running it after a
// finished run changes nothing; an entry the engine never merged (its
// coordinator was down, say) is merged now.
func (c *Coordinator) Remerge(ctx context.Context, study, execution string) (RemergeSummary, error) {
	var sum RemergeSummary
	x, err := execSpool(c.cfg.Spool, study, execution)
	if err != nil {
		return sum, err
	}
	dir := x.Trials()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return sum, fmt.Errorf("spool of %s/%s: %w", study, execution, err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sum.Entries++
		if strings.HasSuffix(e.Name(), partial) {
			sum.Partial++
			continue
		}
		key, attempt, worker, err := parseEntryName(e.Name())
		if err != nil {
			return sum, err
		}
		tr := TrialResult{Key: key.String(), Attempt: attempt, Worker: worker, Entry: e.Name()}
		if tr.ReceiptSHA256, err = fileSHA256(filepath.Join(dir, e.Name(), receiptFile)); err != nil {
			return sum, err
		}
		if s, err := fileSHA256(filepath.Join(dir, e.Name(), run.RecordFile)); err == nil {
			tr.RecordSHA256 = s
		}
		m, err := c.MergeEntry(ctx, study, execution, key, tr)
		if err != nil {
			return sum, err
		}
		switch {
		case m.Already:
			sum.Already++
		case m.Divergent:
			sum.Divergent++
		default:
			sum.Merged++
		}
	}
	return sum, nil
}
