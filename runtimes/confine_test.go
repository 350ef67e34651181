package runtimes

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runContained runs a shell script contained and returns its log and the
// sandbox once it has ended.
func runContained(t *testing.T, script string, limits Limits, writable ...string) (*Sandbox, string) {
	t.Helper()
	dir := t.TempDir()
	env, err := BuildEnv(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "log")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := StartSandbox(ctx, SandboxSpec{Argv: []string{"sh", "-c", script}, Env: env, Dir: dir, Writable: writable, Limits: limits}, logPath)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.Done():
	case <-ctx.Done():
		sb.Kill()
		t.Fatal("contained script did not end")
	}
	return sb, sb.LogTail(60)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: as another user the sandbox maps only that user and cannot switch to rig-sandbox")
	}
}

func TestContainedProcessIsUnprivilegedAndSeesOnlyItsJob(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "installed.env")
	if err := os.WriteFile(secret, []byte("RIG_CACHE=/secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	script := fmt.Sprintf(`
echo "uid=$(id -u)"
cat %[1]s && echo "LEAK read-secret"
ls %[2]s >/dev/null 2>&1 && echo "LEAK see-outside"
touch %[2]s/x 2>/dev/null && echo "LEAK write-outside"
touch /usr/x 2>/dev/null && echo "LEAK write-usr"
touch /x 2>/dev/null && echo "LEAK write-root"
ls /root/.cache/rig >/dev/null 2>&1 && echo "LEAK see-cache"
kill -0 %[3]d 2>/dev/null && echo "LEAK signal-parent"
echo inside > ./mine && echo "wrote-scratch"
echo "procs=$(ls -d /proc/[0-9]* | wc -l)"
`, secret, outside, os.Getpid())
	sb, out := runContained(t, script, CommandLimits())
	if strings.Contains(out, "LEAK") {
		t.Fatalf("the contained process reached what it must not:\n%s", out)
	}
	// As root the process becomes rig-sandbox; as another user it stays that
	// user (uid 0 of a user namespace mapping only it) with no capabilities.
	wantUID := "0"
	if os.Geteuid() == 0 {
		u, err := user.Lookup(SandboxUserName)
		if err != nil {
			t.Fatalf("make setup creates %s: %v", SandboxUserName, err)
		}
		wantUID = u.Uid
	}
	if !strings.Contains(out, "uid="+wantUID) || !strings.Contains(out, "wrote-scratch") {
		t.Fatalf("want uid=%s and a write to its scratch folder:\n%s", wantUID, out)
	}
	c := sb.Containment.Confinement
	if c == nil {
		t.Fatal("no confinement read back")
	}
	if strconv.Itoa(c.UID) != wantUID || !c.NoNewPrivs || c.Capabilities != "0000000000000000" {
		t.Errorf("identity read back: %+v", c)
	}
	if c.VisibleProcesses > 3 {
		t.Errorf("it sees %d processes; its own PID namespace holds init and itself", c.VisibleProcesses)
	}
	if slices.Contains(c.Writable, "/") || slices.Contains(c.Writable, "/usr") {
		t.Errorf("writable mounts include the root or /usr: %v", c.Writable)
	}
	if c.Limits.CPUSeconds != 300 || c.Limits.OpenFiles != 1024 || c.Limits.FileBytes != 256<<20 {
		t.Errorf("limits read back: %+v", c.Limits)
	}
	if sb.LimitHit() != "" {
		t.Errorf("no limit was hit, LimitHit says %q", sb.LimitHit())
	}
}

func TestContainedTreeStopsAtEachLimit(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		name   string
		script string
		limits Limits
		want   string
	}{
		{"fork bomb", `b() { b | b & }; b; sleep 5`, Limits{Processes: 32}, "processes"},
		{"memory", `python3 -c "x = bytearray(512 << 20); import time; time.sleep(2)"`, Limits{Processes: 32, MemoryBytes: 64 << 20}, "memory"},
		{"cpu time", `while :; do :; done`, Limits{CPUSeconds: 1}, "cpu_time"},
		{"file size", `dd if=/dev/zero of=big bs=1M count=64 2>&1`, Limits{FileBytes: 1 << 20}, "file_size"},
		{"scratch", `i=0; while :; do dd if=/dev/zero of=f$i bs=1M count=1 2>/dev/null; i=$((i+1)); done`, Limits{ScratchBytes: 8 << 20}, "scratch_bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb, out := runContained(t, c.script, c.limits)
			if got := sb.LimitHit(); got != c.want {
				t.Fatalf("LimitHit = %q, want %q; exit %v; log:\n%s", got, c.want, sb.ExitError(), out)
			}
		})
	}
}

// TestFilteredSandboxRunsRealPrograms: the seccomp filter must leave what the
// graders' tests and Aider do working: Python with threads, subprocesses and
// a process pool (glibc's clone3 falls back to clone), git making commits.
func TestFilteredSandboxRunsRealPrograms(t *testing.T) {
	sb, out := runContained(t, `
python3 - <<'PY'
import concurrent.futures, multiprocessing, subprocess, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
print("subprocess", subprocess.run(["echo", "ok"], capture_output=True, text=True).stdout.strip())
with multiprocessing.Pool(2) as p:
    print("pool", sum(p.map(abs, [-1, -2, -3])))
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    print("threads", sum(ex.map(lambda x: x * 2, range(4))))
PY
git init -q repo && cd repo && git config user.email rig@localhost && git config user.name rig &&
  echo hi > f && git add f && git commit -qm one && echo "git commits $(git rev-list --count HEAD)"
`, CommandLimits())
	for _, want := range []string{"subprocess ok", "pool 6", "threads 12", "git commits 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the contained output:\n%s", want, out)
		}
	}
	if c := sb.Containment.Confinement; c == nil || c.Seccomp != "filter" {
		t.Errorf("the confinement read back no seccomp filter: %+v", c)
	}
}
