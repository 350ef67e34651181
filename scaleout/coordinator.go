package scaleout

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/receipts"
	"rig/run"
	"rig/studies"
)

// Studies is what the coordinator needs of the daemon that owns the stores.
type Studies interface {
	Snapshot(study string) (*studies.Snapshot, error)
	// Store is the study's open store.
	Store(study string) (*receipts.Store, error)
	// ExecDir is the execution's folder (plan, generation records, repos).
	ExecDir(study, execution string) string
	// AfterTrials runs, on this host, the steps that read an execution's
	// merged outputs once its workflow has run every trial (the fidelity
	// step: run.MergedFidelity); say is told what it does now. It keeps
	// what it finished, so a call after a restart goes on from there.
	AfterTrials(ctx context.Context, study string, e receipts.Execution, say func(current string)) error
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
	workers []worker.Worker // the home's queue and the host-named one (HostCoordinatorQueue)
	closing atomic.Bool     // Close has begun: a follower's end is the daemon's stop

	mu      sync.Mutex // one merge at a time: records are appended in order
	writers map[string]*genrecord.Writer

	followMu sync.Mutex
	follows  map[string]*Handle // by WorkflowID: the executions followed now

	served servedQueues // when each trial queue last returned a trial (QueueServed)

	adverts adverts // the slots the workers advertise per queue (advertise.go)

	trust trust // what the merge's own checks read once (trust.go)

	// reportWait, when set, replaces lostReportWait (tests).
	reportWait time.Duration
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
	c.cfg.Metrics.TrialFinished(string(rec.Outcome), float64(rec.WallMS)/1000) // metrics: every receipt merged or recorded lost
	c.followMu.Lock()
	h := c.follows[WorkflowID(rec.StudyID, rec.ExecutionID)]
	c.followMu.Unlock()
	if h != nil {
		h.note(rec)
	}
}

// CoordinatorQueue is the coordinator's task queue, named by the identity
// of its daemon's home (layout.Home.Identity: a random id written into the
// home once): a workflow submitted before a restart finds the same daemon
// after it, on this machine or, with the home moved, on another.
func CoordinatorQueue(identity string) string {
	return "rig.coordinator." + identity
}

// HostCoordinatorQueue is the queue a coordinator had before homes had an
// identity: the host's name and a hash of the home's path. A workflow
// submitted then schedules its activities there, so the coordinator serves
// it too, for as long as such workflows may run (until they end; only on
// the host that submitted them).
func HostCoordinatorQueue(home string) string {
	h, _ := os.Hostname()
	return "rig.coordinator." + h + "." + shortHash(home)
}

// coordinatorBeat is how often a coordinator activity heartbeats. The
// workflows give them a heartbeat timeout (coordinatorHeartbeatTimeout):
// an activity left on a daemon that died is handed to the restarted one
// within it, not at the end of its whole timeout.
const (
	coordinatorBeat             = 5 * time.Second
	coordinatorHeartbeatTimeout = 30 * time.Second
)

// beat heartbeats the activity of ctx until the returned stop is called.
// Outside an activity (rig study merge, the tests) it does nothing.
func beat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(coordinatorBeat)
		defer t.Stop()
		// No beat at once: most coordinator activities end within
		// milliseconds, and a beat after the end is an error in the log.
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// NewCoordinator dials the cluster and starts the coordinator's worker.
func NewCoordinator(ctx context.Context, cfg Config, home string, st Studies, log *slog.Logger) (*Coordinator, error) {
	if log == nil {
		log = slog.Default()
	}
	id, err := layout.Home(home).Identity()
	if err != nil {
		return nil, err
	}
	queue := CoordinatorQueue(id)
	cl, err := cfg.Dial(ctx, queue, log)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, client: cl, studies: st, queue: queue, log: log, writers: map[string]*genrecord.Writer{}}
	// The home's queue, and the host-named one of workflows submitted
	// before homes had an identity (HostCoordinatorQueue).
	for _, q := range []string{queue, HostCoordinatorQueue(home)} {
		w := worker.New(cl, q, worker.Options{})
		RegisterCoordinator(w, c)
		if err := w.Start(); err != nil {
			c.stopWorkers()
			cl.Close()
			return nil, fmt.Errorf("starting the coordinator's worker on %s: %w", q, err)
		}
		c.workers = append(c.workers, w)
	}
	return c, nil
}

func (c *Coordinator) stopWorkers() {
	for _, w := range c.workers {
		w.Stop()
	}
	c.workers = nil
}

// Close stops the coordinator on a clean stop, in the order that leaves
// every execution as it is on the engine: the followers first (told the
// daemon is stopping, so none records its execution as failed when its
// wait on the engine ends), then the workers and the client, then the
// record writers. The daemon closes the study stores after this.
func (c *Coordinator) Close() {
	c.closing.Store(true)
	c.followMu.Lock()
	hs := make([]*Handle, 0, len(c.follows))
	for _, h := range c.follows {
		hs = append(hs, h)
	}
	c.followMu.Unlock()
	for _, h := range hs {
		h.cancel()
		<-h.done
	}
	c.stopWorkers()
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
// submitted: judge phases and card sub-studies run on the daemon's own
// card. A stopping rule runs here, checked between blocks (CheckStop).
func CheckDesign(d *studies.Design) error {
	for _, jk := range d.JobKinds {
		if jk.Grader.Name == studies.JudgeGrader {
			return fmt.Errorf("job kind %s is judged: the temporal engine does not run judge phases yet; run this study on the daemon's own card (rig study run without --engine)", jk.Name)
		}
	}
	if d.IsCardStudy() {
		return errors.New("a card sub-study holds each arm to simulated cards on one machine: run it on the daemon's own card (rig study run without --engine)")
	}
	return nil
}

// Submit starts the execution's workflow, or finds the one already started
// with the same id: a second submit of the same execution is the same run.
// The options count only when the workflow starts: a resubmit follows it
// as it was started.
func (c *Coordinator) Submit(ctx context.Context, study string, snap *studies.Snapshot, e receipts.Execution, opts RunOptions) error {
	d, err := snap.DesignValue()
	if err != nil {
		return err
	}
	if err := CheckDesign(d); err != nil {
		return err
	}
	if err := opts.Check(); err != nil {
		return err
	}
	inFlight := InFlightFor(d, opts.InFlight)
	in := StudyInput{Study: study, Execution: e.ID, DesignHash: snap.DesignHash, Coordinator: c.queue,
		Chunk: DefaultChunk, InFlight: inFlight, ChunksAtOnce: ChunksAtOnce(inFlight), StartWait: cmp.Or(opts.StartWait, DefaultStartWait)}
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

// InFlightFor is the in-flight limit per task queue an execution of d runs
// with when --in-flight is asked (0: DefaultInFlight). It counts slots: a
// worker serving an arm with slots N runs N of its trials at once, so a
// queue never gets fewer trials scheduled than one worker's slots (a lower
// limit would leave slots of every worker idle).
func InFlightFor(d *studies.Design, asked int) int {
	n := cmp.Or(asked, DefaultInFlight)
	for _, a := range d.Arms {
		n = max(n, a.Pins.SlotCount())
	}
	return min(n, MaxInFlight)
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
	plan, err := run.PlanOf(d, snap, e)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return plan, snap, d, st, nil
}

// Plan lays out the execution's plan, records it, and publishes the
// snapshot, its banks and the execution's derived walls to the spool for
// the workers.
func (c *Coordinator) Plan(ctx context.Context, in StudyInput) (PlanInfo, error) {
	defer beat(ctx)()
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
	if err := run.KeepPlan(layout.Records(dir), plan); err != nil {
		return PlanInfo{}, err
	}
	d, err := snap.DesignValue()
	if err != nil {
		return PlanInfo{}, err
	}
	var walls map[string]studies.WallDerivation
	if len(d.AutoWallJobKinds()) > 0 {
		// Derived once by the daemon when the execution started: every
		// worker holds a trial to the wall a local run would.
		if err := atomicfile.ReadJSON(layout.Records(dir).Walls(), &walls); err != nil {
			return PlanInfo{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("study %s: the design's wall caps are auto and the execution has no derived walls (%v): the daemon derives them when it starts the execution", in.Study, err), ErrMismatch, nil)
		}
	}
	if err := publish(c.cfg.Spool, in.Study, in.Execution, snap, walls); err != nil {
		return PlanInfo{}, err
	}
	size := max(in.Chunk, 1)
	stopping, err := run.CheckStopping(d, plan)
	if err != nil {
		return PlanInfo{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("study %s: %v", in.Study, err), ErrMismatch, nil)
	}
	if stopping {
		bounds := blockBounds(plan, size)
		return PlanInfo{Trials: len(plan.Trials), Chunks: len(bounds), Stopping: true, Bounds: bounds}, nil
	}
	return PlanInfo{Trials: len(plan.Trials), Chunks: (len(plan.Trials) + size - 1) / size}, nil
}

// Chunk is one chunk's trials, each with its queue and next attempt.
func (c *Coordinator) Chunk(ctx context.Context, in ChunkInput) ([]PlannedTrial, error) {
	defer beat(ctx)()
	plan, snap, d, st, err := c.planOf(in.Study, in.Execution)
	if err != nil {
		return nil, err
	}
	size := max(in.Chunk, 1)
	lo, hi := in.Index*size, min((in.Index+1)*size, len(plan.Trials))
	if in.Hi > 0 {
		lo, hi = in.Lo, min(in.Hi, len(plan.Trials))
	}
	if lo >= hi {
		return nil, nil
	}
	keys := make([]receipts.TrialKey, hi-lo)
	for j, t := range plan.Trials[lo:hi] {
		keys[j] = receipts.TrialKey{Arm: t.Key.Arm, TaskID: t.Key.Task, Repeat: t.Key.Repeat}
	}
	// The chunk's own trials only: each chunk of a large plan reading every
	// receipt of the execution made a plan's chunks cost its size squared.
	states, err := st.TrialStates(ctx, in.Execution, keys)
	if err != nil {
		return nil, err
	}
	var out []PlannedTrial
	for j, t := range plan.Trials[lo:hi] {
		pt := PlannedTrial{Key: t.Key.String(), Index: lo + j, Block: t.Block}
		if states[j].Counted {
			pt.Done = true
			out = append(out, pt)
			continue
		}
		pt.Attempt, pt.Parent = states[j].Attempt, states[j].Parent
		arm := d.Arm(t.Key.Arm)
		fa, ok := snap.Arm(t.Key.Arm)
		if arm == nil || !ok {
			return nil, fmt.Errorf("trial %s: arm %s is not in the snapshot", t.Key, t.Key.Arm)
		}
		pt.Runtime, pt.BinarySHA256 = snap.ArmRuntime(*arm)
		pt.ModelSHA256 = fa.ModelSHA256
		pt.CardClass = ArmCardClass(d, *arm)
		pt.Queue = Queue(pt.Runtime, pt.BinarySHA256, pt.CardClass)
		pt.QueueSlots = c.adverts.slots(c.cfg.Spool, pt.Queue)
		out = append(out, pt)
	}
	return out, nil
}

// Merge brings one trial attempt's spool entry into the store, exactly once
// per key and attempt: the same receipt twice is a no-op, and a different
// receipt for a key and attempt already merged is kept as a divergent
// duplicate and never overwrites the first.
func (c *Coordinator) Merge(ctx context.Context, tr TrialResult) (MergeResult, error) {
	defer beat(ctx)()
	key, err := studies.ParseTrialKey(tr.Key)
	if err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrMismatch, nil)
	}
	if err := checkCaller(ctx, tr); err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrMismatch, nil)
	}
	// The names are checked before any becomes a path (the log below).
	if _, err := execSpool(c.cfg.Spool, tr.Study, tr.Execution); err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrMismatch, err)
	}
	// The digests came through the engine: noted before the merge, so a
	// merge cut off here is finished from the spool held to them.
	if err := c.noteReported(tr); err != nil {
		return MergeResult{}, err
	}
	m, err := c.MergeEntry(ctx, tr.Study, tr.Execution, key, tr)
	if err == nil {
		c.noteMerged(tr.Study, key.Arm) // the queue is served (QueueServed)
		// The chunk keeps this many of the queue's trials in flight now.
		m.QueueSlots = c.queueSlotsOf(tr.Study, key.Arm)
	}
	return m, err
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
	if err := c.checkRequest(ctx, st, study, execution, key, tr); err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spool entry %s: %v", dir, err), ErrMismatch, err)
	}
	entry := layout.Records(dir)
	rec, err := readSpoolReceipt(dir, entry, tr)
	if err != nil {
		return MergeResult{}, err
	}
	rk := receipts.TrialKey{Arm: key.Arm, TaskID: key.Task, Repeat: key.Repeat}
	d, err := c.designOf(snap)
	if err != nil {
		return MergeResult{}, err
	}
	plan, err := c.planReceipt(study, execution, snap, key, tr.Attempt)
	if err != nil {
		return MergeResult{}, err
	}
	if err := checkReceipt(rec, plan, snap, d); err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spool entry %s: %v", dir, err), ErrMismatch, err)
	}
	recordPath := entry.TrialRecord()
	if err := checkSpoolRecord(dir, recordPath, tr, rec); err != nil {
		return MergeResult{}, err
	}
	if err := c.checkGrade(ctx, snap, d, key, rec, recordPath, tr.RecordSHA256 != ""); err != nil {
		return MergeResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spool entry %s: %v", dir, err), ErrMismatch, err)
	}
	return c.storeEntry(ctx, st, study, execution, key, rk, tr, rec, entry)
}

// readSpoolReceipt reads the entry's receipt, held to the digest the worker
// sent, and decodes it strictly.
func readSpoolReceipt(dir string, entry layout.Records, tr TrialResult) (receipts.Receipt, error) {
	var rec receipts.Receipt
	raw, err := os.ReadFile(entry.Receipt())
	if err != nil {
		return rec, spoolError("spool entry %s: %v", dir, err)
	}
	if got := sha256Hex(raw); got != tr.ReceiptSHA256 {
		return rec, spoolError("spool entry %s: receipt.json has sha256 %s, the worker sent %s (an incomplete transfer or an edited file: not merged)", dir, got, tr.ReceiptSHA256)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spool entry %s: receipt.json: %v", dir, err), ErrMismatch, nil)
	}
	return rec, nil
}

// checkSpoolRecord holds the entry's generation record, when the worker sent
// one, to the digest the worker sent and the one its receipt names.
func checkSpoolRecord(dir, recordPath string, tr TrialResult, rec receipts.Receipt) error {
	if tr.RecordSHA256 == "" {
		return nil
	}
	got, err := fileSHA256(recordPath)
	if err != nil {
		return spoolError("spool entry %s: %v", dir, err)
	}
	if got != tr.RecordSHA256 || got != rec.GenerationSHA256 {
		return spoolError("spool entry %s: %s has sha256 %s, the worker sent %s and its receipt says %s (not merged)", dir, filepath.Base(recordPath), got, tr.RecordSHA256, rec.GenerationSHA256)
	}
	return nil
}

// storeEntry merges a checked entry under c.mu: a duplicate of a stored
// receipt is answered from it (a divergent one kept apart), otherwise the
// rows and repositories are brought in and the receipt stored.
func (c *Coordinator) storeEntry(ctx context.Context, st *receipts.Store, study, execution string, key studies.TrialKey, rk receipts.TrialKey, tr TrialResult, rec receipts.Receipt, entry layout.Records) (MergeResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, err := st.Receipt(ctx, execution, rk, tr.Attempt); err == nil {
		if old.Pins["spool_receipt_sha256"] == tr.ReceiptSHA256 {
			return MergeResult{Outcome: old.Outcome, Already: true}, nil
		}
		if err := st.PutDivergent(ctx, receipts.Divergent{Receipt: rec, Digest: tr.ReceiptSHA256, Worker: tr.Worker}); err != nil {
			return MergeResult{}, err
		}
		c.log.Warn("divergent duplicate kept apart", "study", study, "trial", key.String(), "attempt", tr.Attempt, "worker", tr.Worker)
		return MergeResult{Outcome: old.Outcome, Divergent: true}, nil
	} else if !errors.Is(err, receipts.ErrNotFound) {
		return MergeResult{}, err
	}
	execDir := c.studies.ExecDir(study, execution)
	if tr.RecordSHA256 != "" {
		sum, err := c.appendRows(execDir, rec.Arm, entry.TrialRecord())
		if err != nil {
			return MergeResult{}, err
		}
		rec.GenerationSHA256 = sum
	}
	if err := copyRepos(entry.Repos(), layout.Records(execDir).Repos()); err != nil {
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
	return MergeResult{Outcome: rec.Outcome}, nil
}

// checkReceipt holds a worker's receipt to the plan: every field the
// plan decides must be the plan's (planReceipt, planFields), no pin the
// coordinator writes may come from the worker, and the digests the
// runtime reports must be the frozen ones (snapshot and design d).
func checkReceipt(rec, plan receipts.Receipt, snap *studies.Snapshot, d *studies.Design) error {
	arm := d.Arm(plan.Arm)
	if arm == nil {
		return fmt.Errorf("arm %s is not in the frozen design", plan.Arm)
	}
	if _, ok := snap.Arm(plan.Arm); !ok {
		return fmt.Errorf("arm %s is not in the snapshot", plan.Arm)
	}
	// model_digest is among these: every runtime reports the GGUF's own
	// sha256 (Ollama's blob is the file's digest), and a runtime that
	// never started leaves the frozen one (run's newReceipt), so no honest
	// receipt has another than the plan's.
	planned := planFields(plan)
	for i, f := range planFields(rec) {
		if p := planned[i]; f.value != p.value {
			return fmt.Errorf("%s %q is not the plan's %q", f.name, f.value, p.value)
		}
	}
	for _, k := range coordinatorPins {
		if v, ok := rec.Pins[k]; ok {
			return fmt.Errorf("pins.%s %q: the coordinator writes that pin, a worker's receipt carries none", k, v)
		}
	}
	kind, want := snap.ArmRuntime(*arm)
	got := rec.Pins["binary_sha256"]
	switch {
	case got == "" && rec.Outcome == receipts.FailedAtCard:
		// The one honest receipt without the pin: the runtime was killed
		// (or refused the offload pin) while it loaded the model, before it
		// reported its build (run's recordFailedAtCard).
	case want == "":
		return fmt.Errorf("the snapshot holds no %s binary for arm %s, so no receipt of it can be checked (freeze the study again)", kind, arm.Name)
	case got != want:
		return fmt.Errorf("pins.binary_sha256 %q is not the frozen %s binary's %s", got, kind, want)
	}
	if arm.Runtime.Engine() == "ollama" && rec.Outcome != receipts.FailedAtCard {
		// A started Ollama reports the digest of the manifest it built
		// from the frozen blob (runtimes.Ollama's pins).
		d := rec.Pins["ollama_digest"]
		if !ollamaDigest.MatchString(d) {
			return fmt.Errorf("pins.ollama_digest %q is not an Ollama manifest digest (64 hex): a started Ollama reports one", d)
		}
		if pin := strings.TrimPrefix(arm.Model.OllamaDigest, "sha256:"); pin != "" && pin != d {
			return fmt.Errorf("pins.ollama_digest %s is not the design's model.ollama_digest %s", d, pin)
		}
	}
	return rec.Validate()
}

// appendRows appends a trial's own record to its arm's record of the
// execution (rows already there are skipped: a retried merge) and returns
// the arm record's sum right after the trial's own rows, which the receipt
// then vouches for: the sum after the append, or, when every row was
// already there (a merge retried after a coordinator died inside it, other
// trials' rows possibly appended since), the sum of the record cut after
// the last of them (sumThrough). A record made
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
	appended := 0
	own := map[string]bool{}
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		own[row.RowID] = true
		if w.Has(row.RowID) {
			continue
		}
		if err := w.Append(row); err != nil {
			return "", err
		}
		appended++
	}
	if appended > 0 || len(own) == 0 {
		return w.Sum(), nil
	}
	return sumThrough(path, own)
}

// sumThrough is the sum of the record at path cut right after the last of
// the rows named in own, all of which are in it.
func sumThrough(path string, own map[string]bool) (string, error) {
	rd, err := genrecord.OpenReader(path)
	if err != nil {
		return "", err
	}
	last := 0 // rows are lines 2 on, after the header
	for line := 2; ; line++ {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rd.Close()
			return "", err
		}
		if own[row.RowID] {
			last = line
		}
	}
	rd.Close()
	prefixes, _, err := genrecord.LineSums(path)
	if err != nil {
		return "", err
	}
	if last == 0 || last > len(prefixes) {
		return "", fmt.Errorf("%s: the trial's rows are not all in it (a retried merge found them there a moment ago)", path)
	}
	return prefixes[last-1], nil
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

// lostReportWait is how long the coordinator, recording an attempt lost,
// waits for the report of a whole spool entry its worker left (outbox.go):
// the worker and the coordinator reconnect to an engine that is back
// within the SDK's reconnect backoff (10 s at most), and the worker's next
// try and its report take seconds more. Within a coordinator activity's
// StartToClose (coordinatorOptions, 5 min), beating all along.
const lostReportWait = 2 * time.Minute

// RecordLost writes the receipt of an attempt no worker returned, unless
// the attempt had in fact finished: a whole spool entry of it, verified as
// any merge is (its digests reported through the engine, then every check
// of MergeEntry), is merged instead, so a finished trial is not run again.
// That covers a merge cut off after the engine reported the entry, and a
// trial that finished while the engine was down: its worker kept the
// result and reports it once the engine is back, so when the attempt's own
// worker left a whole entry the engine has not reported yet, this waits up
// to lostReportWait for that report before it records the attempt lost. An
// attempt cut off before it finished (a .partial entry, or none) is
// recorded preempted and rerun as the next attempt.
func (c *Coordinator) RecordLost(ctx context.Context, l LostAttempt) (MergeResult, error) {
	defer beat(ctx)()
	m, err := c.recordLost(ctx, l)
	if err == nil {
		// A worker lost may have taken its slots with it: the chunk keeps
		// the queue's count of now.
		if key, kerr := studies.ParseTrialKey(l.Key); kerr == nil {
			m.QueueSlots = c.queueSlotsOf(l.Study, key.Arm)
		}
	}
	return m, err
}

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
	if !l.Final {
		if m, ok, err := c.awaitFinished(ctx, st, l, key, rk); err != nil || ok {
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
	noteLost(&rec, l) // its worker and start, where known (lost.go)
	// Under the merge's lock: a report merged meanwhile is not overwritten
	// (the store would refuse it as a conflict, to be retried).
	c.mu.Lock()
	if r, err := st.Receipt(ctx, l.Execution, rk, l.Attempt); err == nil {
		c.mu.Unlock()
		return MergeResult{Outcome: r.Outcome, Already: true}, nil // recorded before a retry of this activity, or merged from a report
	}
	c.log.Info("attempt lost", "study", l.Study, "trial", l.Key, "attempt", l.Attempt, "worker", l.Worker, "why", l.Why)
	err = st.PutReceipt(ctx, rec)
	c.mu.Unlock()
	if err != nil {
		return MergeResult{}, err
	}
	c.stored(rec)
	if x, err := execSpool(c.cfg.Spool, l.Study, l.Execution); err == nil {
		if left := removePartial(x.Trials(), l.Key, l.Attempt); len(left) > 0 {
			c.log.Warn("a lost attempt's half-written spool entries could not be removed", "study", l.Study, "entries", left)
		}
	}
	return MergeResult{Outcome: rec.Outcome}, nil
}

// awaitFinished is the lost attempt's receipt if one is stored (this
// activity retried, or a report merged), else the merge of a whole spool
// entry of it that the engine reported. While the attempt's worker has a
// whole entry the engine has not reported, it looks again every second,
// for up to lostReportWait; ok is false when nothing was found to merge.
func (c *Coordinator) awaitFinished(ctx context.Context, st *receipts.Store, l LostAttempt, key studies.TrialKey, rk receipts.TrialKey) (MergeResult, bool, error) {
	deadline := time.Now().Add(cmp.Or(c.reportWait, lostReportWait))
	for waited := false; ; waited = true {
		if r, err := st.Receipt(ctx, l.Execution, rk, l.Attempt); err == nil {
			if waited {
				c.log.Info("a lost attempt had finished: merged from its worker's report", "study", l.Study, "trial", l.Key, "attempt", l.Attempt, "worker", l.Worker)
			}
			return MergeResult{Outcome: r.Outcome, Already: true}, true, nil
		}
		m, ok, unreported, err := c.mergeFinished(ctx, l.Study, l.Execution, key, l.Attempt)
		if err != nil || ok {
			return m, ok, err
		}
		// Only the attempt's own worker's entry is waited for, where the
		// engine knows that worker (its last heartbeat).
		mine := slices.ContainsFunc(unreported, func(e string) bool { return l.Worker == "" || e == entryName(l.Key, l.Attempt, l.Worker) })
		if !mine || time.Now().After(deadline) {
			for _, e := range unreported {
				c.log.Warn("a spool entry of a lost attempt the engine never reported: not merged", "study", l.Study, "entry", e)
			}
			return MergeResult{}, false, nil
		}
		if !waited {
			c.log.Info("a lost attempt's worker left a whole spool entry: waiting for its report", "study", l.Study, "trial", l.Key,
				"attempt", l.Attempt, "worker", l.Worker, "within", cmp.Or(c.reportWait, lostReportWait))
		}
		select {
		case <-ctx.Done():
			return MergeResult{}, false, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// mergeFinished merges a whole spool entry of the attempt, if a worker left
// one although its merge never finished: the engine reported its digests
// (the merge activity noted them, then failed or its daemon died). An entry
// whose digests never travelled through the engine is not merged: anyone
// who can write the spool could have left it. Those are returned by name
// (unreported), for the caller to wait for their report or name them.
func (c *Coordinator) mergeFinished(ctx context.Context, study, execution string, key studies.TrialKey, attempt int) (m MergeResult, ok bool, unreported []string, err error) {
	x, err := execSpool(c.cfg.Spool, study, execution)
	if err != nil {
		return MergeResult{}, false, nil, err
	}
	st, err := c.studies.Store(study)
	if err != nil {
		return MergeResult{}, false, nil, err
	}
	dir := x.Trials()
	prefix := strings.TrimSuffix(entryName(key.String(), attempt, "x"), "x")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return MergeResult{}, false, nil, nil
	}
	var vouched map[string]reported
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) || strings.HasSuffix(e.Name(), partial) {
			continue
		}
		_, _, worker, err := parseEntryName(e.Name())
		if err != nil {
			continue
		}
		if vouched == nil {
			if vouched, err = c.vouched(ctx, st, study, execution); err != nil {
				return MergeResult{}, false, nil, err
			}
		}
		v, ok := vouched[e.Name()]
		if !ok {
			unreported = append(unreported, e.Name())
			continue
		}
		tr := TrialResult{Study: study, Execution: execution, Key: key.String(), Attempt: attempt, Worker: worker, Entry: e.Name(),
			ReceiptSHA256: v.ReceiptSHA256, RecordSHA256: v.RecordSHA256}
		m, err := c.MergeEntry(ctx, study, execution, key, tr)
		if err != nil {
			c.log.Warn("a finished spool entry of a lost attempt could not be merged", "entry", e.Name(), "err", err)
			continue
		}
		c.log.Info("a lost attempt had finished: merged from the spool", "study", study, "trial", key.String(), "attempt", attempt, "worker", worker)
		return m, true, nil, nil
	}
	return MergeResult{}, false, unreported, nil
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
	// Refused names the entries not merged because the coordinator cannot
	// vouch for their digests (the engine never reported them): the spool is
	// only a transport, so an entry someone wrote there is not a receipt.
	Refused []string `json:"refused,omitempty"`
}

// Remerge brings every finished spool entry of an execution in again. It
// is idempotent: entries already merged are no-ops, so running it after a
// finished run changes nothing; an entry whose merge the engine began but
// never finished (its coordinator was down, say) is merged now. The spool
// is only a transport: an entry is merged only with the digests the engine
// reported for it (reported.jsonl, or its merged receipt's pins), never
// with digests read from the spool itself, and every other entry, or one
// refused as a mismatch, is named in Refused and not merged.
func (c *Coordinator) Remerge(ctx context.Context, study, execution string) (RemergeSummary, error) {
	var sum RemergeSummary
	x, err := execSpool(c.cfg.Spool, study, execution)
	if err != nil {
		return sum, err
	}
	st, err := c.studies.Store(study)
	if err != nil {
		return sum, err
	}
	dir := x.Trials()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return sum, fmt.Errorf("spool of %s/%s: %w", study, execution, err)
	}
	vouched, err := c.vouched(ctx, st, study, execution)
	if err != nil {
		return sum, err
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
		v, ok := vouched[e.Name()]
		if !ok {
			sum.Refused = append(sum.Refused, e.Name()+": the engine never reported this entry's digests, so nothing vouches for it")
			continue
		}
		key, attempt, worker, err := parseEntryName(e.Name())
		if err != nil {
			sum.Refused = append(sum.Refused, e.Name()+": "+err.Error())
			continue
		}
		tr := TrialResult{Study: study, Execution: execution, Key: key.String(), Attempt: attempt, Worker: worker, Entry: e.Name(),
			ReceiptSHA256: v.ReceiptSHA256, RecordSHA256: v.RecordSHA256}
		m, err := c.MergeEntry(ctx, study, execution, key, tr)
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && (appErr.Type() == ErrMismatch || appErr.Type() == ErrSpool) {
			// Refused, or files that are not what the engine reported (cut,
			// or edited since): the rest of the spool is merged all the same.
			sum.Refused = append(sum.Refused, e.Name()+": "+appErr.Message())
			continue
		}
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
