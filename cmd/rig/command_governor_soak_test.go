package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/governor/faults"
	"rig/internal/provision"
)

func TestGovernorSoakNeedsRuntime(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "installed.env")
	_, err := runRig(t, "governor", "soak", "--duration", "1s", "--installed-env", missing, "--state-dir", t.TempDir())
	if err == nil {
		t.Fatal("soak without an installed runtime succeeded")
	}
	if !errors.Is(err, faults.ErrNotInstalled) && !strings.Contains(err.Error(), "installed.env") {
		t.Errorf("err = %v, want ErrNotInstalled or a message naming installed.env", err)
	}
}

// With the provisioned llama-server, a short soak runs trials and reports
// them; skipped until make setup has run.
func TestGovernorSoakReal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real llama-server")
	}
	env := provision.Path()
	if _, err := os.Stat(env); err != nil {
		t.Skipf("no %s (run make setup)", env)
	}
	out, err := runRig(t, "governor", "soak", "--duration", "3s", "--state-dir", t.TempDir(), "--work-dir", t.TempDir())
	if errors.Is(err, faults.ErrNotInstalled) {
		t.Skipf("runtime not installed: %v", err)
	}
	// A loaded test machine can trip the hung-runtime policy for real; the
	// command must then say so and fail, which is what it is for.
	if err != nil && !strings.Contains(err.Error(), "false preemption") {
		t.Fatalf("%v\n%s", err, out)
	}
	if err != nil && !strings.Contains(out, "FALSE PREEMPTION") {
		t.Errorf("error reports a false preemption the output does not show:\n%s", out)
	}
	if !strings.Contains(out, "soak:") {
		t.Errorf("output lacks the soak summary:\n%s", out)
	}
}
