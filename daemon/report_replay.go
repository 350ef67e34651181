package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/replay"
	"rig/studies/report"
)

// ReplaySample replays a seeded sample of n rows from every generation
// record of an execution through its pinned runtime, and keeps the
// summaries in the execution's directory. It refuses while an execution is
// running: the card belongs to the run.
func (s *Service) ReplaySample(ctx context.Context, name, execID string, n int) ([]genrecord.Summary, error) {
	if study, info, ok := s.runningExecution(); ok {
		return nil, fmt.Errorf("study %s is running execution %s: replay after it finishes (the card belongs to the run)", study, info.ID)
	}
	x, err := s.execution(name, execID)
	if err != nil {
		return nil, err
	}
	dir := x.Dir()
	files, err := filepath.Glob(x.Generations())
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("execution %s of study %s has no generation record to replay (%s)", execID, name, dir)
	}
	sort.Strings(files)
	st, err := s.store(name)
	if err != nil {
		return nil, err
	}
	rcpts, err := st.Receipts(ctx, execID)
	if err != nil {
		return nil, err
	}
	var out []genrecord.Summary
	defer s.activity.set(name, "")
	for i, f := range files {
		s.Log.Info("replaying a sample", "record", f, "rows", n)
		s.activity.set(name, fmt.Sprintf("replaying record %d of %d (%d rows): %s", i+1, len(files), n, filepath.Base(f)))
		// Each record is checked against the sha256 its trials' receipts
		// kept before any row is replayed: a record edited after its run
		// must not reach the report as reproduced.
		var sums []replay.ReceiptSum
		var noReceipt string
		if arm, err := replay.RecordArm(f); err == nil {
			if sums = replay.SumsOf(rcpts, arm); len(sums) == 0 {
				noReceipt = fmt.Sprintf("no receipt of arm %s in execution %s records a sha256 for this record; its sha256 was not checked", arm, execID)
			}
		}
		sum, err := replay.ReplayRecord(ctx, replay.ReplayRequest{File: f, NoSandbox: s.NoSandbox, Receipts: sums,
			Options: genrecord.ReplayOptions{Sample: n, Seed: 1}})
		if err == nil && noReceipt != "" {
			sum.Warnings = append(sum.Warnings, noReceipt)
		}
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			sum = genrecord.Summary{Path: f, Status: genrecord.StatusError, Warnings: []string{err.Error()}}
		}
		out = append(out, sum)
	}
	// Kept beside the records, so a report made again shows the same
	// replay without starting the runtimes.
	return out, atomicfile.WriteJSON(x.Replay(), out, 0o600)
}

// replaySection turns an execution's kept replay into the report's section;
// nil when the execution was never replayed.
func (s *Service) replaySection(name, execID string) *report.Replay {
	var sums []genrecord.Summary
	x, err := s.execution(name, execID)
	if err != nil || atomicfile.ReadJSON(x.Replay(), &sums) != nil || len(sums) == 0 {
		return nil
	}
	out := &report.Replay{Tolerance: "exact: every per-token log-probability equal to the record's (the goal on an unchanged stack)"}
	for _, sum := range sums {
		if sum.Tolerance.Token > 0 || sum.Tolerance.Row > 0 {
			out.Tolerance = fmt.Sprintf("|Δ log-prob| ≤ %g nats per token, ≤ %g mean per row", sum.Tolerance.Token, sum.Tolerance.Row)
		}
		record := strings.TrimSuffix(filepath.Base(sum.Path), ".jsonl")
		if sum.Status == genrecord.StatusStackDiffers || (sum.Status == genrecord.StatusError && len(sum.Results) == 0) {
			st := report.StackDiffers
			if sum.Status == genrecord.StatusError {
				st = report.Mismatch
			}
			out.Rows = append(out.Rows, report.ReplayRow{Record: record, Arm: sum.Pins.ModelName, Status: st,
				Detail: strings.Join(append(stackDiffText(sum.StackDiffs), sum.Warnings...), "; ")})
			continue
		}
		for _, r := range sum.Results {
			row := report.ReplayRow{Record: record + " · " + r.RowID, Arm: r.Arm, Status: report.Reproduced, MaxDelta: r.Comparison.MaxAbsDiff,
				Detail: fmt.Sprintf("%d steps, %d checked; replay %.0f ms for a %.0f ms generation", r.Comparison.Steps, r.Comparison.Checked, r.ReplayMS, r.WallMS)}
			if r.Status != genrecord.StatusReproduced {
				row.Status = report.Mismatch
				row.Detail = string(r.Status)
				if m := r.Comparison.First; m != nil {
					row.Detail = fmt.Sprintf("%s at step %d: %s", r.Status, m.Step, m.Reason)
					if m.Reason == genrecord.ReasonField {
						row.Detail = m.String()
					}
				}
				if r.Error != "" {
					row.Detail += ": " + r.Error
				}
			}
			out.Rows = append(out.Rows, row)
		}
	}
	return out
}

func stackDiffText(diffs []genrecord.PinDiff) []string {
	var out []string
	for _, d := range diffs {
		out = append(out, d.String())
	}
	return out
}

// ReportOptions are `rig study report`'s choices.
type ReportOptions struct {
	Execution string `json:"execution,omitempty"`
	// ReplaySample, when above zero, replays that many rows of every
	// generation record before the report is written.
	ReplaySample int `json:"replay_sample,omitempty"`
}
