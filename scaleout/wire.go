package scaleout

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"rig/receipts"
)

// Names of the workflows and activities, as registered with Temporal.
const (
	StudyWorkflowName = "rig.study"
	ChunkWorkflowName = "rig.chunk"

	actPlan       = "rig.plan"         // coordinator: lays out the plan, publishes the snapshot
	actChunk      = "rig.chunk-trials" // coordinator: one chunk's trials, with their next attempts
	actRunTrial   = "rig.run-trial"    // worker: one attempt of one trial
	actMerge      = "rig.merge"        // coordinator: brings one trial's spool into the store
	actRecordLost = "rig.record-lost"  // coordinator: an attempt whose worker was lost
	// coordinator: whether a worker serves a queue a trial timed out on
	// (from versionStartWait on)
	actQueueServed = "rig.queue-served"
	// coordinator: the stopping rule's look at the end of a block (from
	// versionStopping on)
	actCheckStop = "rig.check-stop"
)

// The trial and merge activities' names, for a reader of a workflow's
// history (rig bench scale --fleet times each trial from them).
const (
	ActivityRunTrial = actRunTrial
	ActivityMerge    = actMerge
)

// CoordinatorActivities are the coordinator's side of the workflows, run on
// its task queue. A Coordinator serves them from the studies' stores; a
// bench (bench/scale) plugs in a synthetic plan of its own, so the
// workflows carry no bench-only switch.
type CoordinatorActivities interface {
	// Plan lays out the execution's plan and publishes what workers need.
	Plan(ctx context.Context, in StudyInput) (PlanInfo, error)
	// Chunk is one chunk's trials, each with its queue and next attempt.
	Chunk(ctx context.Context, in ChunkInput) ([]PlannedTrial, error)
	// Merge brings one attempt's spool entry in.
	Merge(ctx context.Context, tr TrialResult) (MergeResult, error)
	// RecordLost records an attempt whose worker never came back.
	RecordLost(ctx context.Context, l LostAttempt) (MergeResult, error)
	// QueueServed says whether a worker serves a queue on which a trial
	// waited its whole start wait: a busy queue is served, one no worker
	// polls is not.
	QueueServed(ctx context.Context, q QueueCheck) (QueueState, error)
	// CheckStop takes the design's stopping rule's look at the end of a
	// block, over the counted receipts, and stores it on the execution.
	CheckStop(ctx context.Context, s StopCheck) (StopResult, error)
}

// RegisterCoordinator registers rig's workflows and a's activities with a
// worker of the coordinator's task queue.
func RegisterCoordinator(w worker.Worker, a CoordinatorActivities) {
	RegisterWorkflows(w)
	w.RegisterActivityWithOptions(a.Plan, activity.RegisterOptions{Name: actPlan})
	w.RegisterActivityWithOptions(a.Chunk, activity.RegisterOptions{Name: actChunk})
	w.RegisterActivityWithOptions(a.Merge, activity.RegisterOptions{Name: actMerge})
	w.RegisterActivityWithOptions(a.RecordLost, activity.RegisterOptions{Name: actRecordLost})
	w.RegisterActivityWithOptions(a.QueueServed, activity.RegisterOptions{Name: actQueueServed})
	w.RegisterActivityWithOptions(a.CheckStop, activity.RegisterOptions{Name: actCheckStop})
}

// RegisterWorkflows registers rig's workflows with a Temporal worker, or
// with a replayer (the replay test of the kept histories).
func RegisterWorkflows(w worker.WorkflowRegistry) {
	w.RegisterWorkflowWithOptions(StudyWorkflow, workflow.RegisterOptions{Name: StudyWorkflowName})
	w.RegisterWorkflowWithOptions(ChunkWorkflow, workflow.RegisterOptions{Name: ChunkWorkflowName})
	w.RegisterWorkflowWithOptions(ReplayWorkflow, workflow.RegisterOptions{Name: ReplayWorkflowName})
	w.RegisterWorkflowWithOptions(ReportWorkflow, workflow.RegisterOptions{Name: ReportWorkflowName})
}

// RegisterTrialActivity registers run as the trial activity with a worker
// of a trial queue: a rig worker's runner, or a bench's synthetic trial.
func RegisterTrialActivity(w worker.Worker, run func(context.Context, TrialInput) (TrialResult, error)) {
	w.RegisterActivityWithOptions(run, activity.RegisterOptions{Name: actRunTrial})
}

// Application error types a worker returns; the workflow reads them.
const (
	// ErrRefused: this worker cannot serve the trial (another build, no
	// snapshot of the study, its governor not ready). Nothing ran; the same
	// attempt goes to another worker of the queue.
	ErrRefused = "rig.refused"
	// ErrMismatch: the trial's stack cannot be the frozen one (the design
	// hash or a pin differs). Never retried; the trial ends in an error
	// receipt.
	ErrMismatch = "rig.mismatch"
	// ErrSpool: a spool entry is incomplete or does not match its digests.
	ErrSpool = "rig.spool"
)

// DefaultChunk is how many trials one child workflow holds: with two
// activities per attempt, a chunk's history stays near 3,000 events, far
// under Temporal's limit of 50,000, and its pending activities under 2,000.
const DefaultChunk = 500

// DefaultInFlight is how many of an execution's trials of one task queue
// are scheduled at once (rig study run --in-flight): the chunks that run
// side by side share it. Each queue has its own limit, so the fleet's
// throughput grows with its queues; set it to the queue's worker count so
// that every worker is busy and no trial waits for one.
const DefaultInFlight = 16

// InFlightPerChunk is about how many trials one chunk workflow keeps in
// flight at most. The history service updates one workflow at a time, and
// each trial is several updates of its chunk (scheduled, started, a beat,
// completed, the merge): trials of one chunk wait behind each other's
// updates. rig bench scale --fleet 100 --fleet-trials 10000, overhead p50
// and p99: 2 chunks side by side 96.0 and 936.7 ms, 10 chunks 38.6 and
// 165.0, 20 chunks (5 trials each) 32.3 and 131.3.
const InFlightPerChunk = 5

// MaxChunksAtOnce bounds the chunks side by side: at the plan's tail each
// chunk that ends signals every one still running (reshare-in-flight), so
// the parent's history grows with their square (32: under 1,000 events).
const MaxChunksAtOnce = 32

// ChunksAtOnce is how many chunks run side by side for an in-flight limit:
// enough that none carries much over InFlightPerChunk, two at least and
// MaxChunksAtOnce at most.
func ChunksAtOnce(inFlight int) int {
	return min(MaxChunksAtOnce, max(2, (inFlight+InFlightPerChunk-1)/InFlightPerChunk))
}

// MaxInFlight bounds --in-flight: a chunk's pending activities stay under
// Temporal's limit of 2,000 per workflow whatever the queues.
const MaxInFlight = DefaultChunk

// RunOptions are a submit's settings, from rig study run's flags; the zero
// value is the defaults.
type RunOptions struct {
	// InFlight is how many trials of one task queue the execution
	// schedules at once (shared by the chunks side by side); 0 is
	// DefaultInFlight.
	InFlight int
	// StartWait is how long a trial waits for a worker of its queue to take
	// it before it ends as an error receipt; 0 is DefaultStartWait.
	StartWait time.Duration
}

// DefaultStartWait is how long a trial waits on its task queue for a
// worker (Temporal's ScheduleToStart timeout) before it ends as an error
// receipt naming the queue and what would serve it. Ten minutes outlasts a
// worker's restart and a model's load on a busy queue; a queue no worker
// serves at all is then said plainly instead of waiting forever.
const DefaultStartWait = 10 * time.Minute

// MinStartWait bounds --start-wait from below: under it a healthy but busy
// queue would turn trials into error receipts.
const MinStartWait = 10 * time.Second

// Check refuses settings the engine cannot honour, naming the flag.
func (o RunOptions) Check() error {
	if o.InFlight < 0 || o.InFlight > MaxInFlight {
		return fmt.Errorf("--in-flight %d: want 1 to %d trials per task queue (0 is the default, %d)", o.InFlight, MaxInFlight, DefaultInFlight)
	}
	if o.StartWait != 0 && o.StartWait < MinStartWait {
		return fmt.Errorf("--start-wait %s: want at least %s (0 is the default, %s)", o.StartWait, MinStartWait, DefaultStartWait)
	}
	return nil
}

// StudyInput starts one execution's workflow. Its id is the study and the
// execution, so a second submit of the same execution is the same run.
type StudyInput struct {
	Study       string `json:"study"`
	Execution   string `json:"execution"`
	DesignHash  string `json:"design_hash"`
	Coordinator string `json:"coordinator"` // the coordinator's task queue
	Chunk       int    `json:"chunk"`
	// InFlight is per task queue, the execution's: the chunks side by side
	// share it (ChunkInput.Share, from versionSharedInFlight on; before,
	// each chunk had it whole). Before versionPerQueue: per chunk, all
	// queues together.
	InFlight int `json:"in_flight"`
	// ChunksAtOnce is how many chunks run side by side (ChunksAtOnce,
	// from the in-flight limit); two at least, to overlap the tail of one
	// chunk with the head of the next.
	ChunksAtOnce int `json:"chunks_at_once"`
	// StartWait is how long a trial waits for a worker of its queue
	// (0: DefaultStartWait; from versionStartWait on).
	StartWait time.Duration `json:"start_wait,omitempty"`
}

// PlanInfo is the plan's size as the coordinator laid it out.
type PlanInfo struct {
	Trials int `json:"trials"`
	Chunks int `json:"chunks"`
	// Stopping: the design has a stopping rule. Chunks then run one at a
	// time, each a run of whole plan blocks starting at its Bounds entry,
	// and the rule is checked at every block's end.
	Stopping bool  `json:"stopping,omitempty"`
	Bounds   []int `json:"bounds,omitempty"`
}

// ChunkInput is one child workflow's part of the plan.
type ChunkInput struct {
	StudyInput
	Index int `json:"index"`
	// Lo and Hi, when Hi > 0, are the chunk's plan trials [Lo, Hi), whole
	// blocks, for a design with a stopping rule (Stopping); else the chunk
	// is the Index-th run of Chunk trials.
	Lo       int  `json:"lo,omitempty"`
	Hi       int  `json:"hi,omitempty"`
	Stopping bool `json:"stopping,omitempty"`
	// Share, when set, is the chunk's part of each queue's InFlight while
	// another chunk runs beside it (from versionSharedInFlight on): the
	// rest comes when the study workflow signals it is alone.
	Share int `json:"share,omitempty"`
}

// PlannedTrial is one trial as a chunk runs it.
type PlannedTrial struct {
	Key     string `json:"key"`
	Queue   string `json:"queue"`
	Attempt int    `json:"attempt"`
	Parent  int    `json:"parent"`
	// Done means a counted receipt is already stored (a resumed run).
	Done         bool   `json:"done,omitempty"`
	Runtime      string `json:"runtime"`
	BinarySHA256 string `json:"binary_sha256"`
	ModelSHA256  string `json:"model_sha256"`
	// CardClass is the card class the queue is named by ("cpu" for none).
	CardClass string `json:"card_class,omitempty"`
	// Index is the trial's place in the plan, Block its plan block.
	Index int `json:"index,omitempty"`
	Block int `json:"block,omitempty"`
	// QueueSlots is the slots the live workers of Queue advertised when the
	// chunk was laid out (as MergeResult.QueueSlots; 0: no count).
	QueueSlots int `json:"queue_slots,omitempty"`
}

// TrialInput is what a worker gets for one attempt.
type TrialInput struct {
	Study        string `json:"study"`
	Execution    string `json:"execution"`
	DesignHash   string `json:"design_hash"`
	Key          string `json:"key"`
	Attempt      int    `json:"attempt"`
	Parent       int    `json:"parent"`
	Queue        string `json:"queue"`
	Runtime      string `json:"runtime"`
	BinarySHA256 string `json:"binary_sha256"`
	ModelSHA256  string `json:"model_sha256"`
}

// TrialResult is all a worker returns: small, whatever the trial wrote.
type TrialResult struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
	Key       string `json:"key"`
	Attempt   int    `json:"attempt"`
	Worker    string `json:"worker"`
	// Entry is the spool entry's folder, relative to the execution's spool.
	Entry         string           `json:"entry"`
	ReceiptSHA256 string           `json:"receipt_sha256"`
	RecordSHA256  string           `json:"record_sha256"` // of the trial's own record; empty when no call was made
	Outcome       receipts.Outcome `json:"outcome"`
	// Runtime is the worker's runtime fingerprint: kind and binary sha256.
	Runtime string `json:"runtime"`
	// Started is when the worker's runner took the trial (engine overhead).
	Started time.Time `json:"started"`
}

// MergeResult is what the coordinator did with a spool entry.
type MergeResult struct {
	Outcome receipts.Outcome `json:"outcome"`
	// Already: the same receipt was merged before (a no-op).
	Already bool `json:"already,omitempty"`
	// Divergent: another receipt with a different digest holds this key and
	// attempt; this one is kept as a divergent duplicate, never merged.
	Divergent bool `json:"divergent,omitempty"`
	// QueueSlots is the slots the live workers of the trial's queue
	// advertise now, at least 1 (advertise.go): the chunk keeps that many
	// of the queue's trials in flight, within its share of the in-flight
	// limit. 0 (a coordinator before versionAdvertised, a test's fake): no
	// count, the limit alone.
	QueueSlots int `json:"queue_slots,omitempty"`
}

// LostAttempt is an attempt that never came back: its worker died or was
// cut off (heartbeat timeout), or its spool could not be brought in.
type LostAttempt struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
	Key       string `json:"key"`
	Attempt   int    `json:"attempt"`
	Parent    int    `json:"parent"`
	Why       string `json:"why"`
	// Final: no further attempt follows (an error receipt, not preempted).
	Final bool `json:"final,omitempty"`
	// Worker is the worker the attempt ran on, where the workflow knows it
	// (lostSeen), and Started when it started (or was scheduled): the
	// receipt's worker pin and started_at.
	Worker  string    `json:"worker,omitempty"`
	Started time.Time `json:"started,omitzero"`
}

// StudyResult is the workflow's result.
type StudyResult struct {
	Trials  int            `json:"trials"`
	Counted int            `json:"counted"`
	Errors  int            `json:"errors"`
	Retried int            `json:"retried"`
	Workers map[string]int `json:"workers"`
	// Stopped: the stopping rule settled every monitored comparison, and
	// NotRun planned trials were never scheduled.
	Stopped bool `json:"stopped,omitempty"`
	NotRun  int  `json:"not_run,omitempty"`
}

// StopCheck asks for the stopping rule's look at the end of the block
// whose last trial is the plan's Through-th.
type StopCheck struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
	Through   int    `json:"through"`
}

// StopResult is the look: Stopped when every monitored comparison is
// settled (no further trial is scheduled); Why is its audit line.
type StopResult struct {
	Stopped bool   `json:"stopped"`
	Why     string `json:"why"`
	NotRun  int    `json:"not_run,omitempty"`
}

// QueueCheck asks whether a worker serves Queue: a trial of the execution
// waited Within on it and no worker took it.
type QueueCheck struct {
	Study     string        `json:"study"`
	Execution string        `json:"execution"`
	Queue     string        `json:"queue"`
	Within    time.Duration `json:"within"`
}

// QueueState is the coordinator's answer: Served means the trial waits on
// (its workers are busy), else it ends as an error receipt.
type QueueState struct {
	Served bool   `json:"served"`
	Why    string `json:"why"`
}
