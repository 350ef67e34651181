package scaleout

import "time"

// Names of the workflows and activities, as registered with Temporal.
const (
	StudyWorkflowName = "rig.study"
	ChunkWorkflowName = "rig.chunk"

	actPlan       = "rig.plan"         // coordinator: lays out the plan, publishes the snapshot
	actChunk      = "rig.chunk-trials" // coordinator: one chunk's trials, with their next attempts
	actRunTrial   = "rig.run-trial"    // worker: one attempt of one trial
	actMerge      = "rig.merge"        // coordinator: brings one trial's spool into the store
	actRecordLost = "rig.record-lost"  // coordinator: an attempt whose worker was lost
	// ActNoModel is the scheduling-path activity of `rig bench scale`: it
	// runs no model, so the fan-out of a large plan can be measured alone.
	ActNoModel = "rig.no-model-trial"
)

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

// DefaultInFlight is how many of a chunk's trials are scheduled at once.
const DefaultInFlight = 16

// StudyInput starts one execution's workflow. Its id is the study and the
// execution, so a second submit of the same execution is the same run.
type StudyInput struct {
	Study       string `json:"study"`
	Execution   string `json:"execution"`
	DesignHash  string `json:"design_hash"`
	Coordinator string `json:"coordinator"` // the coordinator's task queue
	Chunk       int    `json:"chunk"`
	InFlight    int    `json:"in_flight"`
	// NoModel runs ActNoModel on NoModelQueue instead of the trials: a
	// plan of Synthetic trials that exercises only the scheduling path
	// (rig bench scale). No study is read and nothing is stored.
	NoModel      bool   `json:"no_model,omitempty"`
	Synthetic    int    `json:"synthetic,omitempty"`
	NoModelQueue string `json:"no_model_queue,omitempty"`
	// ChunksAtOnce is how many chunks run side by side; two overlap the
	// tail of one chunk with the head of the next.
	ChunksAtOnce int `json:"chunks_at_once"`
}

// PlanInfo is the plan's size as the coordinator laid it out.
type PlanInfo struct {
	Trials int `json:"trials"`
	Chunks int `json:"chunks"`
}

// ChunkInput is one child workflow's part of the plan.
type ChunkInput struct {
	StudyInput
	Index int `json:"index"`
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
	Entry         string `json:"entry"`
	ReceiptSHA256 string `json:"receipt_sha256"`
	RecordSHA256  string `json:"record_sha256"` // of the trial's own record; empty when no call was made
	Outcome       string `json:"outcome"`
	// Runtime is the worker's runtime fingerprint: kind and binary sha256.
	Runtime string `json:"runtime"`
	// Started is when the worker's runner took the trial (engine overhead).
	Started time.Time `json:"started"`
}

// MergeResult is what the coordinator did with a spool entry.
type MergeResult struct {
	Outcome string `json:"outcome"`
	// Already: the same receipt was merged before (a no-op).
	Already bool `json:"already,omitempty"`
	// Divergent: another receipt with a different digest holds this key and
	// attempt; this one is kept as a divergent duplicate, never merged.
	Divergent bool `json:"divergent,omitempty"`
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
}

// StudyResult is the workflow's result.
type StudyResult struct {
	Trials  int            `json:"trials"`
	Counted int            `json:"counted"`
	Errors  int            `json:"errors"`
	Retried int            `json:"retried"`
	Workers map[string]int `json:"workers"`
}
