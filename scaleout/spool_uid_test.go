package scaleout

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"rig/internal/layout"
	"rig/studies"
)

// A fleet's workers need not share one uid with each other or with the
// coordinator: the spool the coordinator publishes takes a worker's entry
// whatever its uid, and what the worker leaves there the coordinator can
// read. (Before: the first worker to write made trials/ 0700 as its own
// uid, so every other uid's trials failed.)
func TestSpoolTakesEntriesFromAnyUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test writes the spool as another user (rig-sandbox)")
	}
	u, err := user.Lookup("rig-sandbox")
	if err != nil {
		t.Skipf("no user rig-sandbox to write as (make setup creates it for the sandbox): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	spool := t.TempDir()
	// The spool and the folders above it are reachable by every worker's uid.
	for _, d := range []string{filepath.Dir(spool), spool} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	snap := &studies.Snapshot{DesignHash: "h", Design: json.RawMessage(`{"name":"s1","arms":[{"name":"a","runtime":"llama-server"}]}`)}
	if err := publish(spool, "s1", "exec-1", snap, nil); err != nil {
		t.Fatal(err)
	}
	x, err := layout.Spool(spool).Execution("s1", "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(x.Trials(), "a%7Cqa%7Ct1%7C1#1.other-uid")
	cmd := exec.Command("/bin/sh", "-c", `umask 022 && mkdir "$1" && echo '{}' > "$1/receipt.json"`, "sh", entry)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if out, err := cmd.CombinedOutput(); err != nil {
		mode := "missing"
		if st, err := os.Stat(x.Trials()); err == nil {
			mode = st.Mode().String()
		}
		t.Fatalf("a worker running as %s could not write its entry into the published spool (trials/ %s): %v: %s", u.Username, mode, err, out)
	}
	// Another uid's entry cannot be removed by a third one: the folder is
	// sticky, as /tmp is.
	st, err := os.Stat(x.Trials())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSticky == 0 {
		t.Errorf("trials/ is %v: want it sticky, so one worker's uid cannot remove another's entries", st.Mode())
	}
}
