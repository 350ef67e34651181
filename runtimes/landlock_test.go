package runtimes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// landlockProbeEnv makes a copy of this test binary restrict itself with
// restrictWrites to the folder it names, then try writes inside and outside.
const landlockProbeEnv = "_RIG_LANDLOCK_PROBE"

func init() {
	if allowed := os.Getenv(landlockProbeEnv); allowed != "" {
		os.Exit(probeLandlock(allowed, os.Getenv(landlockProbeEnv+"_OUTSIDE")))
	}
}

func probeLandlock(allowed, outside string) int {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("no_new_privs:", err)
		return 1
	}
	line, err := restrictWrites([]string{allowed})
	if err != nil {
		fmt.Println("restricting:", err)
		return 1
	}
	fmt.Println("restricted:", line)
	try := func(name string, err error) {
		if err != nil {
			fmt.Printf("%s: %v\n", name, err)
		} else {
			fmt.Printf("%s: ok\n", name)
		}
	}
	try("write inside", os.WriteFile(filepath.Join(allowed, "f"), []byte("x"), 0o644))
	try("mkdir inside", os.Mkdir(filepath.Join(allowed, "d"), 0o755))
	try("write outside", os.WriteFile(filepath.Join(outside, "f"), []byte("x"), 0o644))
	try("mkdir outside", os.Mkdir(filepath.Join(outside, "d"), 0o755))
	try("symlink outside", os.Symlink("/etc/passwd", filepath.Join(outside, "l")))
	try("rename out of the scratch", os.Rename(filepath.Join(allowed, "f"), filepath.Join(outside, "moved")))
	f, err := os.OpenFile("/dev/null", os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		f.Close()
	}
	try("write /dev/null", err)
	// The log, by name, as a shell's `echo >/dev/stderr` opens it.
	f, err = os.OpenFile("/proc/self/fd/2", os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		_, err = f.WriteString("written to the log by name\n")
		f.Close()
	}
	try("write the log by name", err)
	return 0
}

// TestLandlockAllowsWritesOnlyBeneathTheScratch restricts a process with the
// sandbox's Landlock rules (writable: one folder) and tries writes in a
// folder beside it that the process could otherwise write: the second wall
// must refuse them on its own, with no mount making anything read-only.
func TestLandlockAllowsWritesOnlyBeneathTheScratch(t *testing.T) {
	if landlockABI() == 0 {
		t.Skip("this kernel has no Landlock (Linux 5.13+, enabled at boot): the sandbox's mounts are its only wall for writes here")
	}
	allowed, outside := t.TempDir(), t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), landlockProbeEnv+"="+allowed, landlockProbeEnv+"_OUTSIDE="+outside)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, logf
	if err := cmd.Run(); err != nil {
		t.Fatalf("the probe failed: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"write inside: ok", "mkdir inside: ok",
		"write outside: open " + filepath.Join(outside, "f") + ": permission denied",
		"mkdir outside: mkdir " + filepath.Join(outside, "d") + ": permission denied",
		"symlink outside: symlink /etc/passwd " + filepath.Join(outside, "l") + ": permission denied",
		"rename out of the scratch: rename",
		"write /dev/null: ok",
		"write the log by name: ok",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in the probe's output", want)
		}
	}
	if strings.Contains(got, "rename out of the scratch: ok") {
		t.Errorf("a file was moved out of the scratch")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the probe wrote %d entries outside its scratch", len(ents))
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "written to the log by name") {
		t.Errorf("the log by name was not written: %q", b)
	}
	if t.Failed() {
		t.Logf("probe output:\n%s", got)
	}
}
