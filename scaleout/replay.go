package scaleout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
	"rig/replay"
	"rig/runtimes"
	"rig/studies"
)

// ReplayWorkflowName replays a sample of an engine execution's trials, each
// on the task queue its trial ran on: the same runtime build and card class.
const (
	ReplayWorkflowName = "rig.replay"
	actReplay          = "rig.replay-entry"
)

// ReplayInput is one sampled replay of an execution.
type ReplayInput struct {
	Study     string        `json:"study"`
	Execution string        `json:"execution"`
	Entries   []ReplayEntry `json:"entries"`
}

// ReplayEntry is one merged trial whose own record a worker replays.
type ReplayEntry struct {
	Arm          string `json:"arm"`
	Key          string `json:"key"`
	Attempt      int    `json:"attempt"`
	Entry        string `json:"entry"`
	Queue        string `json:"queue"`
	Runtime      string `json:"runtime"`
	BinarySHA256 string `json:"binary_sha256"`
	RecordSHA256 string `json:"record_sha256"`
}

// ReplayResult is one entry's replay, as small as a trial's result.
type ReplayResult struct {
	ReplayEntry
	Worker     string   `json:"worker"`
	Status     string   `json:"status"`
	Replayed   int      `json:"replayed"`
	Reproduced int      `json:"reproduced"`
	MaxAbsDiff float64  `json:"max_abs_diff"`
	Warnings   []string `json:"warnings,omitempty"`
}

// ReplayWorkflow replays every entry on its own queue, side by side.
func ReplayWorkflow(ctx workflow.Context, in ReplayInput) ([]ReplayResult, error) {
	var fs []workflow.Future
	for _, e := range in.Entries {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: e.Queue, StartToCloseTimeout: time.Hour, HeartbeatTimeout: 20 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{ErrMismatch}},
		})
		fs = append(fs, workflow.ExecuteActivity(actx, actReplay, in.Study, in.Execution, e))
	}
	out := make([]ReplayResult, len(fs))
	for i, f := range fs {
		if err := f.Get(ctx, &out[i]); err != nil {
			return out, err
		}
	}
	return out, nil
}

// replayEntry is the worker's side: the entry's record replayed through
// this machine's runtime, its sha256 checked against the merged receipt's.
func (w *Worker) replayEntry(ctx context.Context, study, execution string, e ReplayEntry) (ReplayResult, error) {
	b, err := runtimes.BuildOf(w.opts.Installed, e.Runtime)
	if err != nil || b.BinarySHA256 != e.BinarySHA256 {
		return ReplayResult{}, refuse("worker %s: the replay of %s needs %s built as %s; this worker's is %s", w.opts.ID, e.Key, e.Runtime, e.BinarySHA256, b.BinarySHA256)
	}
	if err := w.gate.lockAlone(ctx); err != nil {
		return ReplayResult{}, err
	}
	defer w.gate.done()
	// The replay starts its own runtime: the trial runner's goes first.
	w.hostMu.Lock()
	for k, h := range w.hosts {
		h.Close(ctx)
		delete(w.hosts, k)
	}
	w.hostMu.Unlock()
	stop := heartbeat(ctx, attemptBeat{Key: e.Key, Worker: w.opts.ID, Started: time.Now().UTC()})
	defer stop()
	x, err := execSpool(w.opts.Config.Spool, study, execution)
	if err != nil {
		return ReplayResult{}, err
	}
	entry, err := x.Entry(e.Entry)
	if err != nil {
		return ReplayResult{}, err
	}
	path := layout.Records(entry).TrialRecord()
	sum, err := replay.ReplayRecord(ctx, replay.ReplayRequest{File: path, NoSandbox: w.opts.NoSandbox, WorkDir: filepath.Join(w.opts.WorkDir, "replay"),
		Options: genrecord.ReplayOptions{WantSum: e.RecordSHA256}})
	if err != nil {
		return ReplayResult{}, fmt.Errorf("worker %s: replaying %s: %w", w.opts.ID, path, err)
	}
	w.log.Info("replayed", "worker", w.opts.ID, "trial", e.Key, "status", sum.Status, "reproduced", sum.Reproduced, "of", sum.Replayed)
	return ReplayResult{ReplayEntry: e, Worker: w.opts.ID, Status: string(sum.Status), Replayed: sum.Replayed, Reproduced: sum.Reproduced,
		MaxAbsDiff: sum.MaxAbsDiff, Warnings: sum.Warnings}, nil
}

// ReplaySample replays perArm merged trials of each arm of an engine
// execution, each on the queue it ran on, and waits for the results.
func (c *Coordinator) ReplaySample(ctx context.Context, study, execution string, perArm int, seed uint64) ([]ReplayResult, error) {
	snap, err := c.studies.Snapshot(study)
	if err != nil {
		return nil, err
	}
	d, err := snap.DesignValue()
	if err != nil {
		return nil, err
	}
	st, err := c.studies.Store(study)
	if err != nil {
		return nil, err
	}
	rs, err := st.Receipts(ctx, execution)
	if err != nil {
		return nil, err
	}
	byArm := map[string][]receipts.Receipt{}
	for _, r := range rs {
		if r.Outcome.Counted() && r.Pins["worker"] != "" && r.Pins["spool_record_sha256"] != "" {
			byArm[r.Arm] = append(byArm[r.Arm], r)
		}
	}
	arms := make([]string, 0, len(byArm))
	for a := range byArm {
		arms = append(arms, a)
	}
	sort.Strings(arms)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	in := ReplayInput{Study: study, Execution: execution}
	for _, a := range arms {
		list := byArm[a]
		rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		arm := d.Arm(a)
		if _, ok := snap.Arm(a); arm == nil || !ok {
			continue
		}
		kind, bin := snap.ArmRuntime(*arm)
		if kind != arm.Runtime.Engine() {
			// Replay relaunches the CPU build (replay/record.go); a card's
			// records are not replayed on workers until it relaunches theirs.
			return nil, fmt.Errorf("arm %s runs on the CUDA build: replay on workers relaunches the CPU build only, so its records are not replayed here (docs/gpu.md)", a)
		}
		for _, r := range list[:min(perArm, len(list))] {
			key := studies.TrialKey{Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat}
			in.Entries = append(in.Entries, ReplayEntry{Arm: a, Key: key.String(), Attempt: r.Attempt, Entry: entryName(key.String(), r.Attempt, r.Pins["worker"]),
				Queue: Queue(kind, bin, ArmCardClass(d, *arm)), Runtime: kind, BinarySHA256: bin, RecordSHA256: r.Pins["spool_record_sha256"]})
		}
	}
	if len(in.Entries) == 0 {
		return nil, fmt.Errorf("execution %s of %s has no merged trial with a generation record to replay", execution, study)
	}
	id := fmt.Sprintf("%s/replay-%d-%d", WorkflowID(study, execution), seed, time.Now().UnixNano())
	wr, err := c.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: c.queue,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE}, ReplayWorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("submitting the replay to temporal at %s: %w", c.cfg.Address, err)
	}
	var out []ReplayResult
	if err := wr.Get(ctx, &out); err != nil {
		return out, err
	}
	return out, nil
}
