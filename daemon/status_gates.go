package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"rig/internal/atomicfile"
	"rig/preflight"
	"rig/studies"
	"rig/studies/run"
)

// FitInfo is one arm's stored preflight verdict at its card, as status
// shows it.
type FitInfo struct {
	Arm         string    `json:"arm"`
	Card        string    `json:"card"`
	Decided     bool      `json:"decided"` // false: no verdict stored yet
	Fits        bool      `json:"fits"`
	Outcome     string    `json:"outcome,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	MarginBytes int64     `json:"margin_bytes"`
	DecidedAt   time.Time `json:"decided_at,omitzero"`
}

// gateInfo reads what the two gates before a run recorded: the preflight
// verdict of every arm at its card and the latest validation run of every
// harness. Neither is there before the study is frozen.
func (s *Service) gateInfo(ctx context.Context, name string) ([]FitInfo, []run.ValidationRecord) {
	_, d, err := s.frozen(name)
	if err != nil {
		return nil, nil
	}
	st, err := s.store(name)
	if err != nil {
		return nil, nil
	}
	var fits []FitInfo
	for _, a := range d.Arms {
		p := studies.PreflightProfile(d, a)
		fi := FitInfo{Arm: a.Name, Card: p.Name}
		if raw, err := st.Preflight(ctx, a.Name, p.Name); err == nil && raw != nil {
			var v preflight.Verdict
			if json.Unmarshal(raw, &v) == nil {
				fi.Decided, fi.Fits, fi.Outcome, fi.Reason, fi.MarginBytes, fi.DecidedAt = true, v.Fits, v.Outcome, v.Reason, v.Margin, v.DecidedAt
			}
		}
		fits = append(fits, fi)
	}
	var vals []run.ValidationRecord
	if sd, err := s.study(name); err == nil {
		_ = atomicfile.ReadJSON(sd.ValidationRecord(), &vals)
	}
	return fits, vals
}

// WriteGates prints the preflight verdicts and validation runs for `rig
// study status`; it prints nothing before the study is frozen, and says
// which command to run where a gate has not run yet.
func (i StudyInfo) WriteGates(w io.Writer) {
	if i.SnapshotHash == "" {
		return
	}
	fmt.Fprintln(w, "preflight")
	if len(i.Preflight) == 0 {
		fmt.Fprintf(w, "  no arm (run: rig study preflight %s)\n", i.Name)
	}
	for _, f := range i.Preflight {
		switch {
		case !f.Decided:
			fmt.Fprintf(w, "  %s at card %s: not decided yet (run: rig study preflight %s)\n", f.Arm, f.Card, i.Name)
		case f.Fits:
			fmt.Fprintf(w, "  %s at card %s: fits, margin %s (decided %s)\n", f.Arm, f.Card, gib(f.MarginBytes), f.DecidedAt.Format(time.RFC3339))
		default:
			fmt.Fprintf(w, "  %s at card %s: doesn't fit, margin %s: %s (decided %s)\n", f.Arm, f.Card, gib(f.MarginBytes), f.Reason, f.DecidedAt.Format(time.RFC3339))
		}
	}
	fmt.Fprintln(w, "validation")
	if len(i.Validation) == 0 {
		fmt.Fprintf(w, "  not run (run: rig study validate %s)\n", i.Name)
	}
	for _, v := range i.Validation {
		verdict := "pass"
		if !v.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "  %s (arm %s): %s at %s", v.Harness, v.Arm, verdict, v.At.Format(time.RFC3339))
		if len(v.Problems) > 0 {
			fmt.Fprintf(w, ": %s", strings.Join(v.Problems, "; "))
		}
		fmt.Fprintln(w)
	}
}

func gib(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
