package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"rig/api"
)

// printGates prints the preflight verdicts and validation runs for `rig
// study status`; it prints nothing before the study is frozen, and says
// which command to run where a gate has not run yet.
func printGates(w io.Writer, i api.StudyInfo) {
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
