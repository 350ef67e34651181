package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"rig/governor"
	"rig/governor/faults"
)

// A run of one class is partial: it prints the class, stores its record and
// never passes.
func TestGovernorFaultsPartialRunNeverPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a live governor for a few seconds")
	}
	state := t.TempDir()
	class := faults.ClassNames()[0]
	out, err := runRig(t, "governor", "faults", "--class", class, "--repetitions", "1",
		"--state-dir", state, "--work-dir", t.TempDir())
	if !errors.Is(err, faults.ErrSuiteFailed) {
		t.Fatalf("err = %v, want ErrSuiteFailed for a partial run\n%s", err, out)
	}
	if !strings.Contains(out, class) {
		t.Errorf("output lacks the class %q:\n%s", class, out)
	}
	ents, err := os.ReadDir(state)
	if err != nil || len(ents) != 1 {
		t.Errorf("want one stored record in the state dir, got %d (%v)", len(ents), err)
	}
	if _, err := governor.LastPass(state); !errors.Is(err, governor.ErrStale) {
		t.Errorf("a partial run counted as a pass: %v", err)
	}
}
