package runtimes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rig/internal/cgroup"
)

// The red-team tests of the sandbox: each is an attack run from inside a real
// sandbox (or on the host path the sandbox's code takes), and each passes only
// when the attack fails. They need root, as the daemon runs under its systemd
// unit; as another user they skip, saying so.

// redteamProbeEnv makes a copy of this test binary, run as the contained
// program, try the system calls the sandbox's filter denies and print what
// each returned (see probeSyscalls).
const redteamProbeEnv = "_RIG_REDTEAM_PROBE"

func init() {
	if os.Getenv(redteamProbeEnv) == "syscalls" {
		os.Exit(probeSyscalls())
	}
}

// hostSocket listens on a unix socket at path (mode 0600, in a folder only
// root may enter) and counts the connections it accepts, with the peer's uid.
type hostSocket struct {
	l     net.Listener
	seen  atomic.Int32
	mu    sync.Mutex
	peers []string
}

func listenHostSocket(t *testing.T, path, reply string) *hostSocket {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &hostSocket{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.seen.Add(1)
			peer := "unknown peer"
			if raw, err := c.(*net.UnixConn).SyscallConn(); err == nil {
				_ = raw.Control(func(fd uintptr) {
					if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
						peer = fmt.Sprintf("uid %d pid %d", cred.Uid, cred.Pid)
					}
				})
			}
			h.mu.Lock()
			h.peers = append(h.peers, peer)
			h.mu.Unlock()
			_, _ = io.WriteString(c, reply)
			c.Close()
		}
	}()
	return h
}

func (h *hostSocket) describe() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("%d connection(s) from %v", h.seen.Load(), h.peers)
}

// rootOnlyDir is a folder only root may enter, as /root or /run/rig are.
func rootOnlyDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func requireSandbox(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if _, _, _, err := sandboxIdentity(); err != nil {
		t.Skipf("no unprivileged account for contained processes: %v", err)
	}
}

// startContained starts script under bash in a sandbox with dir as its
// working folder (writable) and the given outbound forwards.
func startContained(t *testing.T, dir, script string, out []Forward, writable ...string) (*Sandbox, error) {
	t.Helper()
	env, err := BuildEnv(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	sb, err := StartSandbox(ctx, SandboxSpec{Argv: []string{"bash", "-c", script}, Env: env, Dir: dir,
		Writable: writable, Outbound: out, Limits: CommandLimits()}, filepath.Join(t.TempDir(), "log"))
	if err == nil {
		t.Cleanup(sb.Kill)
	}
	return sb, err
}

func waitDone(t *testing.T, sb *Sandbox) string {
	t.Helper()
	select {
	case <-sb.Done():
	case <-time.After(time.Minute):
		sb.Kill()
		t.Fatalf("the contained script did not end:\n%s", sb.LogTail(40))
	}
	return sb.LogTail(60)
}

// connectScript plants a symlink at sock (if it can reach it) pointing to
// target, then connects to the forward's port inside and prints what answers.
func connectScript(sock, target string, port int, waitFor string) string {
	wait := ""
	if waitFor != "" {
		wait = fmt.Sprintf(`for i in $(seq 100); do [ -e %q ] && break; sleep 0.1; done`, waitFor)
	}
	return fmt.Sprintf(`
mkdir -p "$(dirname %[1]q)" 2>/dev/null
rm -f %[1]q 2>/dev/null && ln -s %[2]q %[1]q 2>/dev/null && echo "planted a link in place of the forwarded socket"
%[4]s
if exec 3<>/dev/tcp/127.0.0.1/%[3]d; then
  echo "answer: $(timeout 5 head -c 32 <&3)"
else
  echo "no connection"
fi
`, sock, target, port, wait)
}

// TestRedTeamForwardedSocketSymlink: contained code swaps the socket the
// sandbox forwards its loopback port to (Aider's proxy) for a symlink to a
// root-only host socket, then connects. The attack succeeds if the root-only
// socket ever sees a connection.
func TestRedTeamForwardedSocketSymlink(t *testing.T) {
	requireSandbox(t)
	const port = 18471
	target := filepath.Join(rootOnlyDir(t), "root-only.sock")
	victim := listenHostSocket(t, target, "root-only\n")

	check := func(t *testing.T, proxy *hostSocket, out string) {
		t.Helper()
		if victim.seen.Load() > 0 {
			t.Fatalf("ATTACK SUCCEEDED: the root-only socket %s took %s through the sandbox's forwarder; contained output:\n%s", target, victim.describe(), out)
		}
		if proxy != nil && !strings.Contains(out, "answer: proxy") {
			t.Fatalf("the forward did not reach its own socket (want \"answer: proxy\"): proxy saw %s; output:\n%s", proxy.describe(), out)
		}
	}

	// As Aider's launcher does: the proxy's socket named by socketPath for
	// the work folder, which the contained process may write.
	t.Run("from inside, the socket socketPath names", func(t *testing.T) {
		work := t.TempDir()
		sock, err := socketPath(work, "aider-proxy.sock")
		if err != nil {
			t.Fatal(err)
		}
		proxy := listenHostSocket(t, sock, "proxy\n")
		sb, err := startContained(t, t.TempDir(), connectScript(sock, target, port, ""), []Forward{{Socket: sock, Port: port}}, work)
		if err != nil {
			t.Fatal(err)
		}
		check(t, proxy, waitDone(t, sb))
	})

	// A launcher that puts the socket inside a folder the contained process
	// writes: refused, or at least never followed.
	t.Run("from inside, a socket in a writable folder", func(t *testing.T) {
		work := t.TempDir()
		sock := filepath.Join(work, "proxy.sock")
		proxy := listenHostSocket(t, sock, "proxy\n")
		sb, err := startContained(t, t.TempDir(), connectScript(sock, target, port, ""), []Forward{{Socket: sock, Port: port}}, work)
		if err != nil {
			if !strings.Contains(err.Error(), work) {
				t.Fatalf("refused, but the error does not name the folder %s: %v", work, err)
			}
			t.Logf("refused: %v", err)
			return
		}
		out := waitDone(t, sb)
		check(t, nil, out)
		_ = proxy
	})

	// Whoever swaps the path once the sandbox runs (here the test itself, on
	// the host), init forwards only to the socket it was given at start.
	t.Run("swapped on the host after start", func(t *testing.T) {
		sockDir := rootOnlyDir(t)
		sock := filepath.Join(sockDir, "proxy.sock")
		proxy := listenHostSocket(t, sock, "proxy\n")
		scratch := t.TempDir()
		gate := filepath.Join(scratch, "go")
		sb, err := startContained(t, scratch, connectScript(filepath.Join(t.TempDir(), "unused.sock"), target, port, gate), []Forward{{Socket: sock, Port: port}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(sock); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, sock); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		out := waitDone(t, sb)
		if victim.seen.Load() > 0 {
			t.Fatalf("ATTACK SUCCEEDED: after the path was swapped, init connected to the root-only socket (%s); output:\n%s", victim.describe(), out)
		}
		if !strings.Contains(out, "answer: proxy") {
			t.Fatalf("the forward did not reach the socket it was given at start (proxy saw %s); output:\n%s", proxy.describe(), out)
		}
	})
}

// TestRedTeamLogSymlink: the contained process replaces its own log with a
// symlink to a root-only file. The host's log tail must not return that
// file, and a later start in the same folder must not write into it.
func TestRedTeamLogSymlink(t *testing.T) {
	requireSandbox(t)
	secretDir := rootOnlyDir(t)
	secret := filepath.Join(secretDir, "shadow")
	mark := "REDTEAM-SECRET-" + randomHex(t)
	if err := os.WriteFile(secret, []byte("root:"+mark+":19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath := LogPath(dir, "redteam")
	env, err := BuildEnv(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`echo started; rm -f %[1]q; ln -s %[2]q %[1]q && echo planted`, logPath, secret)
	start := func() (*Sandbox, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return StartSandbox(ctx, SandboxSpec{Argv: []string{"bash", "-c", script}, Env: env, Dir: dir, Limits: CommandLimits()}, logPath)
	}
	sb, err := start()
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, sb)
	if fi, err := os.Lstat(logPath); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the contained process could not plant its link (the test would prove nothing): %v; exit %v; log:\n%s", err, sb.ExitError(), sb.LogTail(20))
	}
	byPath, err := ReadLog(logPath) // as the offload report and holdOffload read it
	if err == nil {
		t.Errorf("ReadLog read through the planted link: %q", byPath)
	}
	for name, got := range map[string]string{"Sandbox.LogTail": sb.LogTail(20), "ReadLog": string(byPath)} {
		if strings.Contains(got, mark) {
			t.Errorf("ATTACK SUCCEEDED: %s returned the root-only file through the planted link:\n%s", name, got)
		}
	}
	if !strings.Contains(sb.LogTail(20), "started") {
		t.Errorf("the sandbox's own log tail lost what the process wrote: %q", sb.LogTail(20))
	}

	// A second start in the same work folder opens the log again.
	sb2, err := start()
	if err == nil {
		waitDone(t, sb2)
	} else {
		t.Logf("second start refused: %v", err)
	}
	b, rerr := os.ReadFile(secret)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if strings.Contains(string(b), "started") {
		t.Errorf("ATTACK SUCCEEDED: the second start wrote the contained process's output into the root-only file:\n%s", b)
	}
	if err != nil && !strings.Contains(err.Error(), logPath) {
		t.Errorf("the refusal does not name the log %s: %v", logPath, err)
	}
}

// TestRedTeamSocketFolderSymlink: a local user plants the predictable socket
// fallback folder (/tmp/rig-sock-<uid>) as a symlink to, or a folder of, its
// own. rig must not put its sockets there, nor change that folder's mode.
func TestRedTeamSocketFolderSymlink(t *testing.T) {
	requireRoot(t)
	long := filepath.Join(t.TempDir(), strings.Repeat("study-directory-", 8)) // too long for a socket address
	cases := []struct {
		name  string
		plant func(t *testing.T, at, attacker string)
	}{
		{"a symlink to the attacker's folder", func(t *testing.T, at, attacker string) {
			if err := os.Symlink(attacker, at); err != nil {
				t.Fatal(err)
			}
		}},
		{"a folder the attacker owns", func(t *testing.T, at, attacker string) {
			if err := os.Mkdir(at, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(at, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(at, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A short TMPDIR, so the socket path fits whichever folder wins.
			tmp, err := os.MkdirTemp("/tmp", "rt")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(tmp) })
			t.Setenv("TMPDIR", tmp)
			attacker := filepath.Join(tmp, "attacker")
			if err := os.Mkdir(attacker, 0o777); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(attacker, 0o777)
			_ = os.Chown(attacker, 65534, 65534)
			planted := filepath.Join(tmp, fmt.Sprintf("rig-sock-%d", os.Getuid()))
			c.plant(t, planted, attacker)
			p, err := socketPath(long, "llama-server.sock")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("socket placed at %s", p)
			real, err := filepath.EvalSymlinks(filepath.Dir(p))
			if err != nil {
				t.Fatal(err)
			}
			if within(real, attacker) || within(filepath.Dir(p), planted) {
				t.Errorf("ATTACK SUCCEEDED: the socket goes to %s (resolves to %s), a folder another user controls", p, real)
			}
			if fi, err := os.Stat(attacker); err == nil && fi.Mode().Perm() != 0o777 {
				t.Errorf("ATTACK SUCCEEDED: rig changed the mode of the attacker's folder to %04o", fi.Mode().Perm())
			}
			fi, err := os.Lstat(filepath.Dir(p))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(st.Uid) != os.Geteuid() {
				t.Errorf("socket folder %s: mode %v owner %d, want a 0700 folder of rig's own", filepath.Dir(p), fi.Mode(), st.Uid)
			}
			if len(p) >= 108 {
				t.Errorf("socket path %d bytes long: %s", len(p), p)
			}
		})
	}

	// Unplanted, the folder is made once and used again.
	tmp, err := os.MkdirTemp("/tmp", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	p, err := socketPath(long, "a.sock")
	if err != nil {
		t.Fatal(err)
	}
	q, err := socketPath(long+"-other", "a.sock")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(tmp, fmt.Sprintf("rig-sock-%d", os.Geteuid()))
	if filepath.Dir(p) != want || filepath.Dir(q) != want || p == q {
		t.Errorf("want two distinct sockets in %s, got %s and %s", want, p, q)
	}
}

// TestRedTeamNoNewNamespacesInside: the real unshare binary inside the
// sandbox may not make a user namespace (where it would be root again) nor a
// network namespace.
func TestRedTeamNoNewNamespacesInside(t *testing.T) {
	// No root needed: as another user the filter is the same.
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare binary (util-linux) on this host")
	}
	_, out := runContained(t, `
unshare -Ur id -u 2>&1; echo "unshare -Ur: rc=$?"
unshare -rn true 2>&1; echo "unshare -rn: rc=$?"
unshare -n true 2>&1; echo "unshare -n: rc=$?"
`, CommandLimits())
	for _, cmd := range []string{"unshare -Ur", "unshare -rn", "unshare -n"} {
		if strings.Contains(out, cmd+": rc=0") {
			t.Errorf("ATTACK SUCCEEDED: %s worked inside the sandbox:\n%s", cmd, out)
		}
		if !strings.Contains(out, cmd+": rc=") {
			t.Fatalf("the script did not run %s:\n%s", cmd, out)
		}
	}
	if !strings.Contains(out, "Operation not permitted") {
		t.Errorf("want the refusal to read EPERM (Operation not permitted):\n%s", out)
	}
}

// TestRedTeamSyscallsInside runs a copy of this test binary as the contained
// program and tries, one by one, the calls the sandbox's filter must deny.
func TestRedTeamSyscallsInside(t *testing.T) {
	// No root needed: as another user the filter is the same.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The build folder of a test binary is root's alone; the contained user
	// must be able to read the program it runs.
	binDir := t.TempDir()
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "probe")
	copyFile(t, self, bin, 0o755)
	dir := t.TempDir()
	env, err := BuildEnv(dir, map[string]string{redteamProbeEnv: "syscalls"})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := StartSandbox(context.Background(), SandboxSpec{Argv: []string{bin}, Env: env, Dir: dir, Limits: CommandLimits()}, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	out := waitDone(t, sb)
	want := map[string]string{
		"unshare(CLONE_NEWUSER)":                          "operation not permitted",
		"unshare(CLONE_NEWNET)":                           "operation not permitted",
		"clone(CLONE_NEWUSER)":                            "operation not permitted",
		"clone(CLONE_NEWNS|CLONE_NEWPID)":                 "operation not permitted",
		"clone3":                                          "function not implemented",
		"io_uring_setup":                                  "operation not permitted",
		"keyctl(KEYCTL_GET_KEYRING_ID)":                   "operation not permitted",
		"add_key":                                         "operation not permitted",
		"ptrace(PTRACE_TRACEME)":                          "operation not permitted",
		"bpf(BPF_MAP_CREATE)":                             "operation not permitted",
		"perf_event_open":                                 "operation not permitted",
		"mount(tmpfs)":                                    "operation not permitted",
		"setns(/proc/self/ns/net)":                        "operation not permitted",
		"userfaultfd":                                     "operation not permitted",
		"clone(plain fork, as libc does)":                 "ok",
		"open and read /proc/self/status":                 "ok",
		"os/exec of a child, as Ollama starts its runner": "ok",
	}
	for call, w := range want {
		line := call + ": " + w
		if !strings.Contains(out, line) {
			t.Errorf("want %q in the probe's output", line)
		}
	}
	if t.Failed() {
		t.Logf("probe output:\n%s", out)
	}
}

// printProbeResult prints a probe's call as the tests read it: "NAME: ok"
// or "NAME: " and the error.
func printProbeResult(name string, err error) {
	if err == nil {
		fmt.Printf("%s: ok\n", name)
		return
	}
	fmt.Printf("%s: %v\n", name, err)
}

// probeSyscalls runs inside the sandbox (see redteamProbeEnv).
func probeSyscalls() int {
	res := printProbeResult
	errno := func(_, _ uintptr, e syscall.Errno) error {
		if e != 0 {
			return e
		}
		return nil
	}
	res("unshare(CLONE_NEWUSER)", unix.Unshare(unix.CLONE_NEWUSER))
	res("unshare(CLONE_NEWNET)", unix.Unshare(unix.CLONE_NEWNET))
	res("clone(CLONE_NEWUSER)", rawFork(unix.CLONE_NEWUSER))
	res("clone(CLONE_NEWNS|CLONE_NEWPID)", rawFork(unix.CLONE_NEWNS|unix.CLONE_NEWPID))
	res("clone(plain fork, as libc does)", rawFork(0))
	res("clone3", rawClone3(unix.CLONE_NEWUSER))
	var params [120]byte
	fd, _, e := syscall.RawSyscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if e == 0 {
		syscall.Close(int(fd))
	}
	res("io_uring_setup", errno(0, 0, e))
	res("keyctl(KEYCTL_GET_KEYRING_ID)", errno(syscall.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd), 0))) // the session keyring
	_, err := unix.AddKey("user", "rig-redteam", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	res("add_key", err)
	res("ptrace(PTRACE_TRACEME)", errno(syscall.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)))
	attr := [20]uint32{1, 4, 4, 1} // BPF_MAP_TYPE_HASH, key 4, value 4, 1 entry
	res("bpf(BPF_MAP_CREATE)", errno(syscall.RawSyscall(unix.SYS_BPF, 0, uintptr(unsafe.Pointer(&attr[0])), unsafe.Sizeof(attr))))
	pattr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
	pfd, err := unix.PerfEventOpen(&pattr, 0, -1, -1, 0)
	if err == nil {
		unix.Close(pfd)
	}
	res("perf_event_open", err)
	res("mount(tmpfs)", unix.Mount("tmpfs", "/tmp", "tmpfs", 0, ""))
	if f, err := os.Open("/proc/self/ns/net"); err == nil {
		res("setns(/proc/self/ns/net)", unix.Setns(int(f.Fd()), 0))
		f.Close()
	}
	ufd, _, e := syscall.RawSyscall(unix.SYS_USERFAULTFD, 0, 0, 0)
	if e == 0 {
		syscall.Close(int(ufd))
	}
	res("userfaultfd", errno(0, 0, e))
	_, err = os.ReadFile("/proc/self/status")
	res("open and read /proc/self/status", err)
	res("os/exec of a child, as Ollama starts its runner", exec.Command("true").Run())
	return 0
}

// rawFork clones the process with flags (a fork when 0); the child exits at
// once, before any Go code runs in it.
func rawFork(flags uintptr) error {
	pid, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, flags|uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 {
		return e
	}
	if pid == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(int(pid), &ws, 0, nil)
	return nil
}

func rawClone3(flags uint64) error {
	args := struct {
		flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls uint64
	}{flags: flags, exitSignal: uint64(syscall.SIGCHLD)}
	pid, _, e := syscall.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	if e != 0 {
		return e
	}
	if pid == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(int(pid), &ws, 0, nil)
	return nil
}

// TestRedTeamGPUNodesOnlyForACard: a grader's test (a sandbox with no card)
// must not find the host's GPU device nodes in its /dev. The host here has no
// card, so the test makes a stand-in node named as the NVIDIA driver names
// its nodes (a copy of /dev/null's device numbers).
func TestRedTeamGPUNodesOnlyForACard(t *testing.T) {
	requireSandbox(t)
	node := "/dev/nvidia-rigredteam" + strconv.Itoa(os.Getpid())
	if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("cannot make a stand-in device node in /dev here: %v", err)
	}
	t.Cleanup(func() { os.Remove(node) })
	_, out := runContained(t, fmt.Sprintf(`ls /dev; [ -e %q ] && echo "LEAK the GPU node is here"; exit 0`, node), CommandLimits())
	if strings.Contains(out, "LEAK") || strings.Contains(out, filepath.Base(node)) {
		t.Fatalf("ATTACK SUCCEEDED: a grader-style sandbox sees the GPU node %s:\n%s", node, out)
	}
	if !strings.Contains(out, "urandom") {
		t.Fatalf("the listing of the contained /dev is missing (the test would prove nothing):\n%s", out)
	}

	// A runtime whose offload pin puts layers on a card gets the nodes: the
	// check above would see one if it were bound.
	dir := t.TempDir()
	env, err := BuildEnv(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := StartSandbox(context.Background(), SandboxSpec{Argv: []string{"sh", "-c", "ls /dev"}, Env: env, Dir: dir,
		Limits: RuntimeLimits(), GPU: true}, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	if out := waitDone(t, sb); !strings.Contains(out, filepath.Base(node)) {
		t.Fatalf("a sandbox with GPU set does not see %s (so the check above proves nothing):\n%s", node, out)
	}
	if c := sb.Containment.Confinement; c == nil || !slices.Contains(c.Devices, filepath.Base(node)) {
		t.Errorf("the confinement read back does not list the GPU node: %+v", c)
	}
}

// TestRedTeamConcurrentCgroups: two hundred sandboxes' cgroups made at once
// through the sandbox's own code path are all distinct, and closing one never
// kills what runs in another.
func TestRedTeamConcurrentCgroups(t *testing.T) {
	requireRoot(t)
	const n = 200
	type made struct {
		tl   *treeLimits
		spec SandboxSpec
		err  error
	}
	all := make([]made, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			spec := SandboxSpec{Limits: CommandLimits()}
			tl := &treeLimits{limits: spec.Limits, stop: make(chan struct{})}
			err := tl.makeGroups(context.Background(), &spec)
			all[i] = made{tl, spec, err}
		}()
	}
	close(start)
	wg.Wait()
	t.Cleanup(func() {
		for _, m := range all {
			if m.tl != nil {
				m.tl.close()
			}
		}
	})
	owner := map[string]int{}
	collisions := 0
	for i, m := range all {
		if m.err != nil {
			t.Fatalf("sandbox %d: making its cgroups: %v", i, m.err)
		}
		if m.spec.CgroupDir == "" && m.spec.PidsCgroupDir == "" {
			t.Skip("no writable cgroup here: nothing to collide")
		}
		for _, d := range []string{m.spec.CgroupDir, m.spec.PidsCgroupDir} {
			if j, ok := owner[d]; ok && j != i {
				collisions++
				t.Logf("sandboxes %d and %d share %s", j, i, d)
			}
			owner[d] = i
		}
	}
	if collisions > 0 {
		t.Errorf("ATTACK SUCCEEDED: %d of %d concurrent sandboxes were given a cgroup another one holds", collisions, n)
	}

	// A process in each; close the odd ones; the even ones must live on.
	procs := make([]*exec.Cmd, n)
	exited := make([]atomic.Bool, n)
	for i, m := range all {
		cmd := exec.Command("sleep", "120")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
		go func() { _ = cmd.Wait(); exited[i].Store(true) }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		for _, d := range []string{m.spec.CgroupDir, m.spec.PidsCgroupDir} {
			if d == "" {
				continue
			}
			if err := cgroup.Join(d, cmd.Process.Pid); err != nil {
				t.Fatalf("moving process %d into %s: %v", i, d, err)
			}
		}
	}
	var cw sync.WaitGroup
	for i := 1; i < n; i += 2 {
		cw.Add(1)
		go func() { defer cw.Done(); all[i].tl.close() }()
	}
	cw.Wait()
	time.Sleep(300 * time.Millisecond)
	killed := 0
	for i := 0; i < n; i += 2 {
		if exited[i].Load() {
			killed++
		}
	}
	if killed > 0 {
		t.Errorf("ATTACK SUCCEEDED: closing the odd sandboxes' cgroups killed %d of the %d even ones", killed, n/2)
	}
	for i := 1; i < n; i += 2 {
		if !exited[i].Load() {
			t.Errorf("sandbox %d's own close left its process running", i)
			break
		}
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRedTeamInitHoldsNoRights: the init stage keeps the host's mount view
// and forwards connections for the contained process; once the program runs
// it must hold no rights to lend (no root, no capabilities), and nothing
// inside may reach its view of the host through /proc/1.
func TestRedTeamInitHoldsNoRights(t *testing.T) {
	requireSandbox(t)
	uid, _, _, _ := sandboxIdentity()
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	sb, err := startContained(t, dir, fmt.Sprintf(`
for i in $(seq 100); do [ -e %q ] && break; sleep 0.1; done
ls /proc/1/root/ >/dev/null 2>&1 && echo "LEAK init's root (the host's) is listable"
cat /proc/1/environ >/dev/null 2>&1 && echo "LEAK init's environment is readable"
echo probed
`, gate), nil)
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sb.PID()))
	if err != nil {
		t.Fatal(err)
	}
	var uids, capEff string
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			uids = strings.Join(strings.Fields(v), " ")
		}
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			capEff = strings.TrimSpace(v)
		}
	}
	want := strings.Repeat(strconv.Itoa(uid)+" ", 4)
	if uids != strings.TrimSpace(want) || strings.Trim(capEff, "0") != "" {
		t.Errorf("ATTACK SURFACE: init runs with uids %q and capabilities %s; want the sandbox user %d with none", uids, capEff, uid)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := waitDone(t, sb)
	if strings.Contains(out, "LEAK") || !strings.Contains(out, "probed") {
		t.Errorf("from inside:\n%s", out)
	}
}

// TestRedTeamConcurrentSandboxes starts real sandboxes at once, each with
// its own memory and pids cgroups: each must get its own and end on its own.
func TestRedTeamConcurrentSandboxes(t *testing.T) {
	requireSandbox(t)
	const n = 24
	type ran struct {
		sb  *Sandbox
		out string
		err error
	}
	res := make([]ran, n)
	var wg sync.WaitGroup
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := t.TempDir()
			env, err := BuildEnv(dir, nil)
			if err != nil {
				res[i].err = err
				return
			}
			sb, err := StartSandbox(context.Background(), SandboxSpec{Argv: []string{"sh", "-c", "sleep 1; echo ok-" + strconv.Itoa(i)},
				Env: env, Dir: dir, Limits: CommandLimits()}, filepath.Join(t.TempDir(), "log"))
			if err != nil {
				res[i].err = err
				return
			}
			<-sb.Done()
			res[i] = ran{sb: sb, out: sb.LogTail(5), err: sb.ExitError()}
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for i, r := range res {
		if r.err != nil || !strings.Contains(r.out, "ok-"+strconv.Itoa(i)) {
			t.Errorf("sandbox %d: %v, log %q", i, r.err, r.out)
			continue
		}
		cg := r.sb.Containment.CgroupJoined
		if cg == "" {
			continue
		}
		if j, ok := seen[cg]; ok {
			t.Errorf("ATTACK SUCCEEDED: sandboxes %d and %d shared the cgroup %s", j, i, cg)
		}
		seen[cg] = i
	}
}
