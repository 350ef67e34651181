package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/provision"
	"rig/internal/testenv"
)

// rigBin is the real rig binary, built once for every test here.
var rigBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rig-deploy-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rigBin = filepath.Join(dir, "rig")
	if out, err := exec.Command("go", "build", "-o", rigBin, "rig/cmd/rig").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build rig/cmd/rig: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needSuite stops a test that runs the governor's real fault suite (about
// 90 s on two cores, with the provisioned llama-server) under -short, and
// when nothing is provisioned.
func needSuite(t *testing.T) {
	t.Helper()
	testenv.Long(t, "the governor's fault suite with a real runtime")
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (the fault suite's llama-server)", err)
}

// settings parses `rig worker --dry-run`: one "name: value" line each.
func settings(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	// The dry run's lines start at its "id:" line; a launcher may have
	// printed others before it (the fault suite's table).
	if i := strings.LastIndex(out, "\nid: "); i >= 0 {
		out = out[i+1:]
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		m[k] = v
	}
	for _, k := range []string{"id", "card", "home", "governor state", "heartbeat", "fault-suite pass"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("rig worker --dry-run printed no %q line:\n%s", k, out)
		}
	}
	return m
}

// records are the fault suite's dated records in the governor's state dir.
func records(t *testing.T, dir string) []string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, "governor-faults-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// wantPassFor checks that a worker's settings name stateDir and find there
// a fresh pass, which the suite the deploy file runs wrote.
func wantPassFor(t *testing.T, s map[string]string, stateDir string) {
	t.Helper()
	if s["governor state"] != stateDir {
		t.Errorf("the worker reads the governor's state in %s; the deploy file's fault suite writes to %s", s["governor state"], stateDir)
	}
	if !strings.HasPrefix(s["fault-suite pass"], "fresh, ") {
		t.Errorf("the worker would find no fresh pass: %s", s["fault-suite pass"])
	}
	if !strings.HasPrefix(s["heartbeat"], stateDir+string(filepath.Separator)) {
		t.Errorf("the worker's heartbeat %s is outside its governor state %s", s["heartbeat"], stateDir)
	}
}
