package run

// Where one trial attempt's evidence goes: the study's store for a local
// execution (storeSink), a spool entry for a worker (spoolSink), and a code
// trial's kept repository.

import (
	"context"
	"errors"
	"os"
	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/receipts"
	"rig/runtimes"
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

// keptRows is a sink whose record outlives a process, so that a call's
// rows can be there before its attempt runs (trial.go, skipKeptAttempts).
type keptRows interface {
	keptRow(arm string, rp runtimes.Pins, callID string) (bool, error)
}

// keptRow reports whether the arm's record holds a row of callID (or of
// its first harness call); a record not yet written holds none.
func (s storeSink) keptRow(arm string, rp runtimes.Pins, callID string) (bool, error) {
	if _, err := os.Stat(s.x.records().Generation(arm)); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	w, err := s.x.writer(arm, rp)
	if err != nil {
		return false, err
	}
	return w.Has(callID) || w.Has(callID+"/call-1"), nil
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
