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
// The arm's runtime stays up between trials of the same arm. Up to the
// arm's slots (pins.slots) of its trials run at once on that runtime, each
// on a slot of its own; a trial of another arm waits for none of them and
// is refused while they run (ErrBusy): one runtime per card.
type Host struct {
	mu sync.Mutex
	x  *trialRunner
	// The trials in flight on x.cur: how many, the slot numbers free, the
	// round they share (a preemption of one preempts them all), and whether
	// one of them ended the runtime, which then takes no more trials and
	// is released when the last of them ends.
	inFlight int
	free     []int
	round    *slotRound
	ended    bool
}

// ErrBusy is a trial a Host cannot start now: its runtime serves another
// arm's trials, has no free slot, or is ending. Nothing ran; the engine
// may hand the trial to another worker, or to this one later.
var ErrBusy = errors.New("the runtime is busy")

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
// attempt to another worker. Trials of the arm whose runtime is up may
// run at once, up to its slots (a worker with slots); ErrBusy when none
// is free.
func (h *Host) RunTrial(ctx context.Context, key studies.TrialKey, attempt, parent int, dir string) (HostedResult, error) {
	x := h.x
	arm := x.design.Arm(key.Arm)
	if arm == nil {
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
	slot, peers, started, err := h.enter(ctx, sink, *arm, key)
	if err != nil {
		return HostedResult{}, err
	}
	if started {
		o, err := x.runTrial(ctx, sink, *arm, x.cur, key, peers, slot)
		h.leave(ctx, key, slot, o, err)
		if err != nil {
			return HostedResult{}, fmt.Errorf("trial %s: %w", key, err)
		}
	}
	if sink.receipt == nil {
		return HostedResult{}, errors.New("trial " + key.String() + ": the runner stored no receipt")
	}
	return HostedResult{Receipt: *sink.receipt, Dir: dir}, nil
}

// Slots is how many of arm's trials a Host runs at once: its pins.slots,
// 1 for an arm the design does not have.
func (h *Host) Slots(arm string) int {
	if a := h.x.design.Arm(arm); a != nil {
		return a.Pins.SlotCount()
	}
	return 1
}

// enter takes a slot of the arm's runtime for key, starting the runtime
// when no trial is in flight. started is false when the runtime failed at
// the card: key's receipt is then in sink already. A trial alone (slots 1)
// gets slot 0 and no peers, as a local run's trial alone does.
func (h *Host) enter(ctx context.Context, sink Sink, arm studies.Arm, key studies.TrialKey) (slot int, peers *slotRound, started bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.x
	switch {
	case h.inFlight > 0 && x.curArm != arm.Name:
		return 0, nil, false, fmt.Errorf("trial %s: %w with %d trial(s) of arm %s", key, ErrBusy, h.inFlight, x.curArm)
	case h.inFlight > 0 && (h.ended || h.round.reason() != ""):
		return 0, nil, false, fmt.Errorf("trial %s: %w: a trial beside it ended the runtime of arm %s", key, ErrBusy, arm.Name)
	case h.inFlight > 0 && len(h.free) == 0:
		return 0, nil, false, fmt.Errorf("trial %s: %w: all %d slots of arm %s are taken", key, ErrBusy, arm.Pins.SlotCount(), arm.Name)
	}
	if h.inFlight == 0 {
		// Not ok: the runtime failed at the card, and that is key's
		// receipt, in sink already.
		if _, ok, err := x.keepArm(ctx, sink, arm, key); err != nil || !ok {
			return 0, nil, false, err
		}
		n := arm.Pins.SlotCount()
		h.free, h.ended = nil, false
		for i := 1; i <= n; i++ {
			h.free = append(h.free, i)
		}
		h.round = nil
		if n > 1 {
			h.round = newSlotRound()
			if x.res != nil {
				// The trials in flight together share the runtime's peak.
				x.res.ResetPeak()
			}
		}
	}
	h.inFlight++
	if h.round == nil {
		return 0, nil, true, nil
	}
	slot, h.free = h.free[0], h.free[1:]
	return slot, h.round, true, nil
}

// leave gives key's slot back. A trial that ended the runtime (preempted,
// an error, a failure at the card, or a runner error) ends it for those
// beside it too: a preemption preempts them, and the last to leave
// releases the runtime so the next trial gets a fresh one.
func (h *Host) leave(ctx context.Context, key studies.TrialKey, slot int, o receipts.Outcome, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlight--
	if slot > 0 {
		h.free = append(h.free, slot)
	}
	if o == receipts.Preempted && h.round != nil {
		h.round.preempt(fmt.Sprintf("a trial in flight beside it on the same runtime (%s) was preempted", key))
	}
	if err != nil || o == receipts.Preempted || o == receipts.Error || o == receipts.FailedAtCard {
		h.ended = true
	}
	if h.inFlight == 0 && h.ended {
		h.x.release(ctx)
		h.ended = false
	}
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
