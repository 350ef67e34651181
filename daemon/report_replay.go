package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"rig/api"
	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/replay"
	"rig/runtimes"
)

// ReplaySample replays a seeded sample of n rows from every generation
// record of an execution through its pinned runtime, and keeps the
// summaries in the execution's directory. It refuses while an execution is
// running: the card belongs to the run.
func (rp Reports) ReplaySample(ctx context.Context, name, execID string, n int) ([]genrecord.Summary, error) {
	if study, info, ok := rp.s.runningExecution(); ok {
		return nil, fmt.Errorf("study %s is running execution %s: replay after it finishes (the card belongs to the run)", study, info.ID)
	}
	x, err := rp.s.execution(name, execID)
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
	st, err := rp.s.store(name)
	if err != nil {
		return nil, err
	}
	rcpts, err := st.Receipts(ctx, execID)
	if err != nil {
		return nil, err
	}
	var out []genrecord.Summary
	defer rp.s.activity.set(name, "")
	for i, f := range files {
		rp.s.Log.Info("replaying a sample", "record", f, "rows", n)
		rp.s.activity.set(name, fmt.Sprintf("replaying record %d of %d (%d rows): %s", i+1, len(files), n, filepath.Base(f)))
		// Each record is checked against the sha256 its trials' receipts
		// kept before any row is replayed: a record edited after its run
		// must not reach the report as reproduced.
		var sums []replay.ReceiptSum
		var noReceipt string
		var server *runtimes.ServerSpec
		arm, err := replay.RecordArm(f)
		if err == nil {
			if sums = replay.SumsOf(rcpts, arm); len(sums) == 0 {
				noReceipt = fmt.Sprintf("no receipt of arm %s in execution %s records a sha256 for this record; its sha256 was not checked", arm, execID)
			}
			// An openai-server arm's record replays on the server its
			// frozen arm describes.
			if snap, serr := rp.s.Snapshot(name); serr == nil {
				server, _ = replay.FrozenServer(snap, arm)
			}
		}
		sum, err := replay.ReplayRecord(ctx, replay.ReplayRequest{File: f, NoSandbox: rp.s.NoSandbox, Receipts: sums,
			Options: genrecord.ReplayOptions{Sample: n, Seed: 1}, Server: server})
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

// ReportOptions are `rig study report`'s choices.
type ReportOptions = api.ReportOptions
