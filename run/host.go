package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"rig/internal/layout"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
)

// HostSpec is what a Host needs of one execution: the frozen snapshot, the
// execution as the coordinator stored it, and a working folder on this
// machine. It has no store: the receipts go back to the coordinator.
type HostSpec struct {
	Study    string
	Snapshot *studies.Snapshot
	Exec     receipts.Execution
	// WorkDir holds the runtimes' scratch and the harness repositories
	// while a trial runs.
	WorkDir string
	// Walls are the derived walls of the auto-wall job kinds, as the
	// coordinator fixed them for the execution.
	Walls map[string]studies.WallDerivation
}

// Host runs single trials of one execution for a scale-out engine: the
// engine hands out trial keys and attempts, the Host runs each through the
// same trial runner a local execution uses, and leaves the receipt and the
// trial's generation record in a spool folder for the coordinator to merge.
// The arm's runtime stays up between trials of the same arm; one trial runs
// at a time (one runtime per card).
type Host struct {
	mu sync.Mutex
	x  *trialRunner
}

// NewHost checks the snapshot's banks against their pinned digests and
// readies a Host. A bank that changed since the freeze is refused, and so
// is an auto-wall design without the walls the coordinator derived.
func NewHost(env Env, spec HostSpec) (*Host, error) {
	x, err := newTrialRunner(env, spec.Study, spec.Snapshot, spec.Exec, spec.WorkDir, spec.Walls)
	if err != nil {
		return nil, err
	}
	return &Host{x: x}, nil
}

// HostedResult is one hosted trial's outcome: its receipt, and where its
// evidence lies (the spool folder, with layout.Records' TrialRecord when
// the runtime answered and Repos for a harness trial).
type HostedResult struct {
	Receipt receipts.Receipt
	Dir     string
}

// RunTrial runs attempt (with parent, 0 for a first attempt) of one
// planned trial. dir is an empty spool folder the trial's evidence goes
// to. An error means nothing was recorded: the engine may give the same
// attempt to another worker.
func (h *Host) RunTrial(ctx context.Context, key studies.TrialKey, attempt, parent int, dir string) (HostedResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.x
	if x.design.Arm(key.Arm) == nil {
		return HostedResult{}, fmt.Errorf("trial %s: arm %s is not in the frozen design", key, key.Arm)
	}
	if _, ok := x.banks[key.JobKind]; !ok {
		return HostedResult{}, fmt.Errorf("trial %s: job kind %s has no bank in the snapshot", key, key.JobKind)
	}
	if attempt < 1 || parent < 0 || parent >= attempt {
		return HostedResult{}, fmt.Errorf("trial %s: attempt %d with parent %d: an attempt counts from 1 and reruns an earlier one", key, attempt, parent)
	}
	// Readable by the coordinator, which may run as another uid.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return HostedResult{}, err
	}
	sink := &spoolSink{records: layout.Records(dir), attempt: attempt, parent: parent,
		designHash: x.snap.DesignHash, study: x.study, exec: x.exec.ID}
	defer sink.close()
	if _, err := x.Trial(ctx, sink, key); err != nil {
		return HostedResult{}, err
	}
	if sink.receipt == nil {
		return HostedResult{}, errors.New("trial " + key.String() + ": the runner stored no receipt")
	}
	return HostedResult{Receipt: *sink.receipt, Dir: dir}, nil
}

// Close stops the runtime the Host keeps up between trials.
func (h *Host) Close(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.x.release(ctx)
}

// UnrunReceipt is the receipt of an attempt that left none of its own: its
// worker was lost mid-trial (outcome preempted, so the next attempt reruns
// it) or no worker could run it (outcome error). It carries the frozen
// pins, since no runtime answered.
func UnrunReceipt(study string, snap *studies.Snapshot, execID string, key studies.TrialKey, attempt, parent int, outcome receipts.Outcome, detail string) (receipts.Receipt, error) {
	d, err := snap.DesignValue()
	if err != nil {
		return receipts.Receipt{}, err
	}
	arm := d.Arm(key.Arm)
	if arm == nil {
		return receipts.Receipt{}, fmt.Errorf("trial %s: arm %s is not in the frozen design", key, key.Arm)
	}
	x := &trialRunner{study: study, design: d, snap: snap, exec: receipts.Execution{ID: execID}}
	rec := x.newReceipt(*arm, key, attempt, parent, runtimes.Pins{})
	rec.Machine = "unknown: no worker returned this attempt"
	rec.FinishedAt = rec.StartedAt
	rec.Outcome = outcome
	rec.Detail = detail
	return rec, rec.Validate()
}
