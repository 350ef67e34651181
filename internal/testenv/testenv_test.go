package testenv

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNeedsSetupFailsUnderCI runs a helper test in a child process with and
// without CI=true and reads how it ended.
func TestNeedsSetupFailsUnderCI(t *testing.T) {
	if os.Getenv("_TESTENV_CHILD") == "1" {
		NeedsSetup(t, "llama-server", errors.New("not in installed.env"))
		t.Log("went on past a missing piece")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(ci string) (string, error) {
		cmd := exec.Command(self, "-test.run=^TestNeedsSetupFailsUnderCI$", "-test.v")
		cmd.Env = append(os.Environ(), "_TESTENV_CHILD=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("true")
	if err == nil || !strings.Contains(out, "llama-server is missing although setup ran (CI=true)") || !strings.Contains(out, "--- FAIL") {
		t.Errorf("under CI=true: want a failure naming the piece, got err %v:\n%s", err, out)
	}
	out, err = run("")
	if err != nil || !strings.Contains(out, "--- SKIP") || !strings.Contains(out, "(run make setup)") {
		t.Errorf("without CI: want a skip naming the fix, got err %v:\n%s", err, out)
	}
	if strings.Contains(out, "went on past") {
		t.Errorf("the test went on past a missing piece:\n%s", out)
	}
	if NeedsSetup(t, "nothing", nil); t.Skipped() || t.Failed() {
		t.Error("a nil error stopped the test")
	}
}

// TestLongFailsUnderCIWithShort: under -short a long test skips, naming
// what it would run, except under CI=true, where it fails; without -short
// it runs.
func TestLongFailsUnderCIWithShort(t *testing.T) {
	if os.Getenv("_TESTENV_CHILD") == "1" {
		Long(t, "starts a real runtime")
		t.Log("ran the long part")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(ci string, short bool) (string, error) {
		args := []string{"-test.run=^TestLongFailsUnderCIWithShort$", "-test.v"}
		if short {
			args = append(args, "-test.short")
		}
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "_TESTENV_CHILD=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("true", true); err == nil || !strings.Contains(out, "-short under CI=true would skip: starts a real runtime") {
		t.Errorf("-short under CI=true: want a failure, got err %v:\n%s", err, out)
	}
	if out, err := run("", true); err != nil || !strings.Contains(out, "--- SKIP") || strings.Contains(out, "ran the long part") {
		t.Errorf("-short without CI: want a skip, got err %v:\n%s", err, out)
	}
	if out, err := run("true", false); err != nil || !strings.Contains(out, "ran the long part") {
		t.Errorf("without -short: want the long part run, got err %v:\n%s", err, out)
	}
}
