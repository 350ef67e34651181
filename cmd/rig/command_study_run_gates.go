package main

import (
	"context"
	"fmt"
	"io"

	"rig/api"
)

// runGates performs, before a counted run, each gate the study has not
// passed yet, in order (freeze, preflight, validation, dry run), each by the
// same daemon call as its own command, so each is recorded exactly as when
// run alone; it prints every verdict and returns the first refusal, which
// stops the run before it starts. A study past its freeze (running,
// decided) goes straight to the run, which answers for itself.
func runGates(ctx context.Context, c api.Client, name string, w io.Writer) error {
	st, err := c.Status(ctx, api.NameRequest{Name: name})
	if err != nil {
		return err
	}
	switch st.State {
	case api.Draft, api.Reviewed:
		return fmt.Errorf("study %s is %s, not frozen: a counted run needs an outside review and the Director's approval first (rig study review %s, then rig study approve %s)", name, st.State, name, name)
	case api.Approved:
		fmt.Fprintf(w, "== freeze\n")
		if st, err = c.Freeze(ctx, api.NameRequest{Name: name}); err != nil {
			return fmt.Errorf("freeze refused: %w", err)
		}
		fmt.Fprintf(w, "frozen: snapshot sha256:%s\n", st.SnapshotHash)
		printWarnings(w, st.Warnings)
	case api.Frozen:
	default:
		return nil
	}
	if !preflightDone(st) {
		fmt.Fprintf(w, "== preflight\n")
		verdicts, err := c.Preflight(ctx, api.NameRequest{Name: name}, w)
		if err != nil {
			return fmt.Errorf("preflight refused: %w", err)
		}
		for _, v := range verdicts {
			if !v.Fits {
				return fmt.Errorf("preflight: %s on %s does not fit: %s (nothing was run; the counted run is not started)", v.Model, v.Runtime, v.Reason)
			}
		}
	}
	if !validationPassed(st) {
		fmt.Fprintf(w, "== validation\n")
		if _, err := c.Validate(ctx, api.NameRequest{Name: name}, w); err != nil {
			return fmt.Errorf("validation refused: %w", err)
		}
	}
	fmt.Fprintf(w, "== dry run\n")
	if _, err := c.DryRun(ctx, api.DryRunRequest{Name: name}, w); err != nil {
		return fmt.Errorf("dry run refused (the counted run is not started): %w", err)
	}
	fmt.Fprintf(w, "== counted run\n")
	return nil
}

// preflightDone is true when every arm has a decided verdict.
func preflightDone(st api.StudyInfo) bool {
	if len(st.Preflight) == 0 {
		return false
	}
	for _, f := range st.Preflight {
		if !f.Decided {
			return false
		}
	}
	return true
}

// validationPassed is true when a validation run is recorded and every
// harness in it passed; the daemon's run gate checks the harnesses against
// the arms.
func validationPassed(st api.StudyInfo) bool {
	if len(st.Validation) == 0 {
		return false
	}
	for _, v := range st.Validation {
		if !v.Pass {
			return false
		}
	}
	return true
}
