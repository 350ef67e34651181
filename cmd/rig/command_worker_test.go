package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// worker --dry-run prints where the worker would look, its own heartbeat
// and the fault-suite pass its governor would find, and connects to
// nothing (the Temporal address here answers nobody).
func TestWorkerDryRunPrintsSettings(t *testing.T) {
	home, state, spool := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("RIG_STATE_DIR", state)
	out, err := runRig(t, "worker", "--dry-run", "--home", home, "--id", "gpu07", "--card", "1",
		"--temporal", "127.0.0.1:1", "--namespace", "lab", "--spool", spool, "--installed-env", "/opt/rig/installed.env")
	if err != nil {
		t.Fatal(err)
	}
	gov := filepath.Join(state, "governor")
	for _, want := range []string{
		"id: gpu07\ncard: 1\n",
		"home: " + home + "\nwork dir: " + filepath.Join(home, "worker", "gpu07") + "\ninstalled env: /opt/rig/installed.env\n",
		"temporal: 127.0.0.1:1\nnamespace: lab\nspool: " + spool + "\n",
		"governor state: " + gov + "\nheartbeat: " + filepath.Join(gov, "heartbeat-worker-gpu07") + "\n",
		"fault-suite pass: none (",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("worker --dry-run printed no %q:\n%s", want, out)
		}
	}
}
