package run

import (
	"context"
	"fmt"
	"os"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/atomicfile"
	"rig/internal/cgroup"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// Sink is where one trial attempt's evidence goes. The runner is the same
// whoever hosts it; only the sink differs: the study's store and the
// execution's records on the machine that owns the study (storeSink), or a
// spool folder a coordinator merges from a worker (spoolSink).
type Sink interface {
	// NextAttempt is the attempt this try of the trial is, and the earlier
	// attempt it reruns (0 for a first attempt).
	NextAttempt(ctx context.Context, key receipts.TrialKey) (attempt, parent int, err error)
	// Records is the folder the trial's kept repositories go under.
	Records() layout.Records
	// Writer is the generation record the trial's rows go to, opened with
	// the pins of the runtime that answered.
	Writer(arm string, rp runtimes.Pins) (*genrecord.Writer, error)
	// PutReceipt keeps the attempt's receipt.
	PutReceipt(ctx context.Context, rec receipts.Receipt) error
}

// trialRunner is the one piece of code that runs a trial, for a local
// execution and for a worker's Host alike: it starts the arm's runtime (or
// keeps the one the trial before used), holds the trial under the
// governor's watch, makes the call, grades it, and leaves the receipt and
// the generation rows in a Sink. The wall caps, the arm's binary and the
// governor's wiring are therefore the same in both modes.
type trialRunner struct {
	env       Env
	study     string
	design    *studies.Design
	snap      *studies.Snapshot
	exec      receipts.Execution
	installed provision.Installed
	graders   *tasks.Registry
	banks     map[string]*tasks.Bank
	topK      int
	workDir   string
	// walls are the derived walls of the job kinds whose harness_caps.wall
	// is auto, fixed once per execution (on the machine that owns the
	// study: a worker is given them).
	walls map[string]studies.WallDerivation
	// validating marks a validation run, which uses its own short caps.
	validating bool
	// cur is the runtime kept up between trials of the same arm, curArm
	// that arm, and res the card reservation the runtime started in.
	cur    runtimes.Runtime
	curArm string
	res    *cgroup.Reservation
}

// newTrialRunner readies the runner of one execution: the snapshot's banks
// checked against their frozen digests (a bank changed since is a stale
// asset), a derived wall for every auto-wall job kind, and its scratch
// folder.
func newTrialRunner(env Env, study string, snap *studies.Snapshot, exec receipts.Execution, workDir string, walls map[string]studies.WallDerivation) (*trialRunner, error) {
	env.Log = env.log()
	d, err := snap.DesignValue()
	if err != nil {
		return nil, err
	}
	for _, jk := range d.AutoWallJobKinds() {
		if _, ok := walls[jk]; !ok {
			return nil, fmt.Errorf("job kind %s: harness_caps.wall is %q and no derived wall was given to the runner (the machine that owns the study derives it from its validation runs: rig study validate, then rig study dry-run)", jk, studies.AutoWall)
		}
	}
	x := &trialRunner{env: env, study: study, design: d, snap: snap, exec: exec,
		installed: env.Installed, graders: env.Graders(), topK: d.TopK, workDir: workDir, walls: walls}
	if x.topK == 0 {
		x.topK = studies.DefaultTopK
	}
	if x.banks, err = LoadBanks(snap); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, err
	}
	return x, nil
}

// Trial runs one attempt of the trial key and leaves its receipt in sink.
// The arm's runtime is started, or kept from the trial before when that was
// the same arm; a runtime that was stopped, died or failed at the card is
// not kept for the next. Only an error that makes going on unsafe is
// returned: everything else is the attempt's receipt.
func (x *trialRunner) Trial(ctx context.Context, sink Sink, key studies.TrialKey) (receipts.Outcome, error) {
	arm := x.design.Arm(key.Arm)
	if arm == nil {
		return "", fmt.Errorf("trial %s: arm %s is not in the frozen design", key, key.Arm)
	}
	if x.cur == nil || x.curArm != arm.Name {
		x.release(ctx)
		rt, err := x.startArm(ctx, *arm)
		if x.failedAtCard(err) {
			// The card is too small even to load the model: a failure at
			// this card, recorded, never retried smaller.
			outcome, rerr := x.recordFailedAtCard(ctx, sink, *arm, key, err)
			x.stopArm(ctx, nil)
			if rerr != nil {
				return "", fmt.Errorf("trial %s: %w", key, rerr)
			}
			return outcome, nil
		}
		if err != nil {
			x.stopArm(ctx, nil)
			return "", fmt.Errorf("arm %s: %w", arm.Name, err)
		}
		x.cur, x.curArm = rt, arm.Name
	}
	outcome, err := x.runTrial(ctx, sink, *arm, x.cur, key)
	if err != nil {
		return "", fmt.Errorf("trial %s: %w", key, err)
	}
	if outcome == receipts.Preempted || outcome == receipts.Error || outcome == receipts.FailedAtCard {
		// The runtime was stopped or died: the next trial gets a fresh one.
		x.release(ctx)
	}
	return outcome, nil
}

// release stops the runtime kept between trials, and its reservation.
func (x *trialRunner) release(ctx context.Context) {
	x.stopArm(ctx, x.cur)
	x.cur, x.curArm = nil, ""
}

// storeSink is a local execution's sink: attempts and receipts in the
// study's store (each receipt also told to the stopping rule's monitor),
// rows in the arm's record of the execution.
type storeSink struct{ x *execution }

func (s storeSink) NextAttempt(ctx context.Context, key receipts.TrialKey) (int, int, error) {
	return s.x.store.NextAttempt(ctx, s.x.exec.ID, key)
}

func (s storeSink) Records() layout.Records { return s.x.records() }

func (s storeSink) Writer(arm string, rp runtimes.Pins) (*genrecord.Writer, error) {
	return s.x.writer(arm, rp)
}

func (s storeSink) PutReceipt(ctx context.Context, rec receipts.Receipt) error {
	if err := s.x.store.PutReceipt(ctx, rec); err != nil {
		return err
	}
	if s.x.env.Stored != nil {
		s.x.env.Stored(rec) // metrics
	}
	if s.x.mon != nil {
		s.x.mon.record(rec)
	}
	return nil
}

// spoolSink is a hosted trial's sink: the attempt the engine gave, and a
// spool folder of that trial alone (its receipt, kept by the Host, and its
// own generation record) for the coordinator to merge.
type spoolSink struct {
	records         layout.Records
	attempt, parent int
	designHash      string
	study, exec     string
	receipt         *receipts.Receipt
	writer          *genrecord.Writer
}

func (s *spoolSink) NextAttempt(context.Context, receipts.TrialKey) (int, int, error) {
	return s.attempt, s.parent, nil
}

func (s *spoolSink) Records() layout.Records { return s.records }

func (s *spoolSink) Writer(_ string, rp runtimes.Pins) (*genrecord.Writer, error) {
	if s.writer == nil {
		w, err := genrecord.OpenWriter(s.records.TrialRecord(), callrow.Pins(rp, s.designHash, s.study, s.exec))
		if err != nil {
			return nil, err
		}
		s.writer = w
	}
	return s.writer, nil
}

func (s *spoolSink) PutReceipt(_ context.Context, rec receipts.Receipt) error {
	if err := rec.Validate(); err != nil {
		return err
	}
	s.receipt = &rec
	return nil
}

func (s *spoolSink) close() {
	if s.writer != nil {
		s.writer.Close()
	}
}

// KeepRepo keeps a code trial's final repository under records: a code
// trial's output is the repository the harness left, not text, and the code
// grader must be able to run on it again (rig grade --regrade) after the
// scratch folder is gone.
func KeepRepo(records layout.Records, callID string, files map[string]string) error {
	// Readable by whoever may read the records folder (a worker's spool
	// entry is merged by a coordinator that may run as another uid; an
	// execution's folder sits in the study's own 0700 home).
	if err := os.MkdirAll(records.Repos(), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteJSON(records.Repo(callID), files, 0o644)
}

// KeptRepo reads a code trial's kept repository; ok is false when none was
// kept (an execution from before repositories were kept).
func KeptRepo(records layout.Records, callID string) (files map[string]string, ok bool) {
	if err := atomicfile.ReadJSON(records.Repo(callID), &files); err != nil {
		return nil, false
	}
	return files, true
}
