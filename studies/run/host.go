package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"rig/genrecord"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
)

// hostedTrial is the one trial a Host runs now.
type hostedTrial struct {
	attempt, parent int
	dir             string // the trial's spool folder: its record and kept repositories
	receipt         *receipts.Receipt
	writer          *genrecord.Writer
}

// RecordFile is the name of a hosted trial's own generation record in its
// spool folder.
const RecordFile = "generations.jsonl"

func (x *execution) nextAttempt(ctx context.Context, rk receipts.TrialKey) (attempt, parent int, err error) {
	if x.hosted != nil {
		return x.hosted.attempt, x.hosted.parent, nil
	}
	return x.store.NextAttempt(ctx, x.exec.ID, rk)
}

func (x *execution) putReceipt(ctx context.Context, rec receipts.Receipt) error {
	if x.hosted != nil {
		if err := rec.Validate(); err != nil {
			return err
		}
		x.hosted.receipt = &rec
		return nil
	}
	if err := x.store.PutReceipt(ctx, rec); err != nil {
		return err
	}
	if x.mon != nil {
		x.mon.record(rec)
	}
	return nil
}

// trialWriter is where a trial's generation rows go: the arm's record of
// the execution, or, for a hosted trial, a record of that trial alone.
func (x *execution) trialWriter(arm string, rp runtimes.Pins) (*genrecord.Writer, error) {
	if x.hosted == nil {
		return x.writer(arm, rp)
	}
	if x.hosted.writer == nil {
		w, err := genrecord.OpenWriter(filepath.Join(x.hosted.dir, RecordFile), RecordPins(rp, x.snap.DesignHash, x.study, x.exec.ID))
		if err != nil {
			return nil, err
		}
		x.hosted.writer = w
	}
	return x.hosted.writer, nil
}

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
// engine hands out trial keys and attempts, the Host runs each in its
// native runtime under the governor, exactly as a local execution does, and
// leaves the receipt and the trial's generation record in a spool folder
// for the coordinator to merge. The arm's runtime stays up between trials
// of the same arm; one trial runs at a time (one runtime per card).
type Host struct {
	mu     sync.Mutex
	x      *execution
	cur    runtimes.Runtime
	curArm string
}

// NewHost checks the snapshot's banks against their pinned digests and
// readies a Host. A bank that changed since the freeze is refused.
func NewHost(env Env, spec HostSpec) (*Host, error) {
	env.Log = env.log()
	d, err := spec.Snapshot.DesignValue()
	if err != nil {
		return nil, err
	}
	x := &execution{env: env, study: spec.Study, design: d, snap: spec.Snapshot, exec: spec.Exec,
		installed: env.Installed, graders: env.Graders(),
		topK: d.TopK, writers: map[string]*genrecord.Writer{}, walls: spec.Walls, workDir: spec.WorkDir}
	if x.topK == 0 {
		x.topK = studies.DefaultTopK
	}
	if err := os.MkdirAll(x.workDir, 0o700); err != nil {
		return nil, err
	}
	if x.banks, err = LoadBanks(spec.Snapshot); err != nil {
		return nil, err
	}
	for _, jk := range d.AutoWallJobKinds() {
		if _, ok := spec.Walls[jk]; !ok {
			return nil, fmt.Errorf("job kind %s: harness_caps.wall is %q and no derived wall was given to the host", jk, studies.AutoWall)
		}
	}
	return &Host{x: x}, nil
}

// HostedResult is one hosted trial's outcome: its receipt, and where its
// evidence lies (the spool folder, with RecordFile when the runtime
// answered and repos/ for a harness trial).
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
	var arm studies.Arm
	found := false
	for _, a := range x.design.Arms {
		if a.Name == key.Arm {
			arm, found = a, true
		}
	}
	if !found {
		return HostedResult{}, fmt.Errorf("trial %s: arm %s is not in the frozen design", key, key.Arm)
	}
	if _, ok := x.banks[key.JobKind]; !ok {
		return HostedResult{}, fmt.Errorf("trial %s: job kind %s has no bank in the snapshot", key, key.JobKind)
	}
	if attempt < 1 || parent < 0 || parent >= attempt {
		return HostedResult{}, fmt.Errorf("trial %s: attempt %d with parent %d: an attempt counts from 1 and reruns an earlier one", key, attempt, parent)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return HostedResult{}, err
	}
	x.hosted = &hostedTrial{attempt: attempt, parent: parent, dir: dir}
	x.recDir = dir
	defer func() {
		if x.hosted.writer != nil {
			x.hosted.writer.Close()
		}
		x.hosted = nil
	}()
	if h.cur == nil || h.curArm != arm.Name {
		x.stopArm(ctx, h.cur)
		h.cur = nil
		rt, err := x.startArm(ctx, arm)
		if x.failedAtCard(err) {
			_, rerr := x.recordFailedAtCard(ctx, arm, key, err)
			x.stopArm(ctx, nil)
			if rerr != nil {
				return HostedResult{}, fmt.Errorf("trial %s: %w", key, rerr)
			}
			return HostedResult{Receipt: *x.hosted.receipt, Dir: dir}, nil
		}
		if err != nil {
			x.stopArm(ctx, nil)
			return HostedResult{}, fmt.Errorf("arm %s: %w", arm.Name, err)
		}
		h.cur, h.curArm = rt, arm.Name
	}
	outcome, err := x.runTrial(ctx, arm, h.cur, key)
	if err != nil {
		return HostedResult{}, fmt.Errorf("trial %s: %w", key, err)
	}
	if outcome == receipts.Preempted || outcome == receipts.Error || outcome == receipts.FailedAtCard {
		// The runtime was stopped or died; the next trial gets a fresh one.
		x.stopArm(ctx, h.cur)
		h.cur = nil
	}
	if x.hosted.receipt == nil {
		return HostedResult{}, errors.New("trial " + key.String() + ": the runner stored no receipt")
	}
	return HostedResult{Receipt: *x.hosted.receipt, Dir: dir}, nil
}

// Close stops the runtime the Host keeps up between trials.
func (h *Host) Close(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.x.stopArm(ctx, h.cur)
	h.cur = nil
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
	x := &execution{study: study, design: d, snap: snap, exec: receipts.Execution{ID: execID}}
	rec := x.newReceipt(*arm, key, attempt, parent, runtimes.Pins{})
	rec.Machine = "unknown: no worker returned this attempt"
	rec.FinishedAt = rec.StartedAt
	rec.Outcome = outcome
	rec.Detail = detail
	return rec, rec.Validate()
}
