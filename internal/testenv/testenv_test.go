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
