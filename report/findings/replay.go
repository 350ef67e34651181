package findings

import (
	"fmt"
	"path/filepath"
	"strings"

	"rig/genrecord"
	"rig/report"
	"rig/studies"
)

// Replay turns an execution's kept replay summaries into the report's
// section; nil when the execution was never replayed.
func Replay(sums []genrecord.Summary) *report.Replay {
	if len(sums) == 0 {
		return nil
	}
	out := &report.Replay{Tolerance: "exact: every per-token log-probability equal to the record's (the goal on an unchanged stack)"}
	for _, sum := range sums {
		if sum.Tolerance.Token > 0 || sum.Tolerance.Row > 0 {
			out.Tolerance = fmt.Sprintf("|Δ log-prob| ≤ %g nats per token, ≤ %g mean per row", sum.Tolerance.Token, sum.Tolerance.Row)
		}
		record := strings.TrimSuffix(filepath.Base(sum.Path), ".jsonl")
		if !perRow(sum) {
			st := report.StackDiffers
			if sum.Status == genrecord.StatusError {
				st = report.Mismatch
			}
			out.Rows = append(out.Rows, report.ReplayRow{Record: record, Arm: sum.Pins.ModelName, Status: st,
				Detail: strings.Join(append(stackDiffText(sum.StackDiffs), sum.Warnings...), "; ")})
			continue
		}
		for _, r := range sum.Results {
			row := report.ReplayRow{Record: record + " · " + r.RowID, Arm: r.Arm, Status: replayStatus(r), MaxDelta: r.Comparison.MaxAbsDiff,
				Detail: fmt.Sprintf("%d steps, %d checked; replay %.0f ms for a %.0f ms generation", r.Comparison.Steps, r.Comparison.Checked, r.ReplayMS, r.WallMS)}
			if row.Status == report.Mismatch {
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

// perRow reports whether a summary has per-row results: a record whose
// stack differs, or that failed before any row, has one line for the record.
func perRow(sum genrecord.Summary) bool {
	return sum.Status != genrecord.StatusStackDiffers && (sum.Status != genrecord.StatusError || len(sum.Results) > 0)
}

func replayStatus(r genrecord.RowResult) report.ReplayStatus {
	if r.Status != genrecord.StatusReproduced {
		return report.Mismatch
	}
	return report.Reproduced
}

// replayByTrial is each trial's worst replay result: one mismatched call
// marks the trial. A row whose id names no trial key is passed over.
func replayByTrial(sums []genrecord.Summary) map[studies.TrialKey]report.ReplayStatus {
	out := map[studies.TrialKey]report.ReplayStatus{}
	for _, sum := range sums {
		if !perRow(sum) {
			continue
		}
		for _, r := range sum.Results {
			id, _, _ := strings.Cut(r.RowID, "#")
			key, err := studies.ParseTrialKey(id)
			if err != nil {
				continue
			}
			if prev, seen := out[key]; !seen || prev == report.Reproduced {
				out[key] = replayStatus(r)
			}
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
