package runtimes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"rig/internal/testenv"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The second round of attacks on the sandbox (issue 43), each run from
// inside a real sandbox by a copy of this test binary (the probes below),
// each passing only when the attack fails.

// Probes of the second round, selected by redteamProbeEnv.
const (
	probeTerminal   = "terminal"    // push a command into /dev/tty's input (TIOCSTI)
	probeTTYHost    = "tty-host"    // outside: a session on a pseudo-terminal that starts a sandbox
	probeIPCPlant   = "ipc-plant"   // leave a shared-memory segment and a message behind
	probeIPCRead    = "ipc-read"    // read what an earlier sandbox left
	probeHostView   = "host-view"   // namespaces, cgroups, init's name, host name as seen inside
	probeSocketKind = "socket-kind" // open sockets of every family, and the other refused calls
	// probeKeyEnv carries the System V key the IPC probes use.
	probeKeyEnv = "_RIG_REDTEAM_IPC_ID"
	// probeBinEnv names the probe's copy for the tty host, which starts it.
	probeBinEnv = "_RIG_REDTEAM_PROBE_BIN"
)

// injectedCommand is what the terminal probe types: harmless, and easy to
// find in the terminal's input queue.
const injectedCommand = "echo rig-redteam-typed\n"

func init() {
	switch os.Getenv(redteamProbeEnv) {
	case probeTerminal:
		os.Exit(probeTypeIntoTerminal())
	case probeTTYHost:
		os.Exit(ttyHost())
	case probeIPCPlant:
		os.Exit(probeIPC(true))
	case probeIPCRead:
		os.Exit(probeIPC(false))
	case probeHostView:
		os.Exit(probeWhatTheHostShows())
	case probeSocketKind:
		os.Exit(probeSocketFamilies())
	}
}

// probeCopy copies this test binary where the contained user can read it.
func probeCopy(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "probe")
	copyFile(t, self, bin, 0o755)
	return bin
}

// runProbe runs the probe's copy contained, with the probe selected and the
// extra environment, and returns what it printed.
func runProbe(t *testing.T, bin, probe string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	vars := map[string]string{redteamProbeEnv: probe}
	for k, v := range extra {
		vars[k] = v
	}
	env, err := BuildEnv(dir, vars)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := StartSandbox(context.Background(), SandboxSpec{Argv: []string{bin}, Env: env, Dir: dir, Limits: CommandLimits()}, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	return waitDone(t, sb)
}

// openPTY opens a new pseudo-terminal pair: the master, and the terminal
// end a shell would have as its controlling terminal.
func openPTY(t *testing.T) (master, terminal *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here (/dev/ptmx: %v)", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening /dev/pts/%d: %v", n, err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestRedTeamTerminalInjection: a contained program opens /dev/tty and
// pushes a command into the terminal's input queue with TIOCSTI, where the
// shell that started rig would read it as typed (as root, under a daemon
// started from a terminal). The test gives a session a real pseudo-terminal
// as its controlling terminal, as a shell has; that session starts the
// sandbox, then reads what is waiting in its terminal's input. The attack
// succeeds if the command is there.
func TestRedTeamTerminalInjection(t *testing.T) {
	requireSandbox(t)
	if b, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti"); err == nil && strings.TrimSpace(string(b)) == "0" {
		// Then the kernel refuses TIOCSTI itself; the probe still shows
		// the sandbox gives no terminal.
		t.Log("this kernel refuses TIOCSTI to everyone (dev.tty.legacy_tiocsti = 0)")
	}
	bin := probeCopy(t)
	_, terminal := openPTY(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host := exec.Command(self)
	host.Env = append(os.Environ(), redteamProbeEnv+"="+probeTTYHost, probeBinEnv+"="+bin)
	host.Stdin = terminal
	var out bytes.Buffer
	host.Stdout, host.Stderr = &out, &out
	// A session whose controlling terminal is the pseudo-terminal, as a
	// login shell's is; Ctty is the child's own descriptor 0.
	host.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- host.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the terminal's session failed: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		_ = host.Process.Kill()
		t.Fatalf("the terminal's session did not end:\n%s", out.String())
	}
	report := out.String()
	t.Logf("what the session saw:\n%s", report)
	if !strings.Contains(report, "terminal input waiting: ") {
		t.Fatalf("the session did not read its terminal's input:\n%s", report)
	}
	if strings.Contains(report, "rig-redteam-typed") && strings.Contains(report, "terminal input waiting: \"echo") {
		t.Errorf("a contained program typed into the terminal that started rig:\n%s", report)
	}
	for _, want := range []string{"open /dev/tty: ", "ioctl(TIOCSTI) on a descriptor that is no terminal: operation not permitted"} {
		if !strings.Contains(report, want) {
			t.Errorf("want %q in the probe's output", want)
		}
	}
	if strings.Contains(report, "open /dev/tty: ok") {
		t.Errorf("the contained program could open /dev/tty")
	}
}

// ttyHost runs outside the sandbox as a session leader with a terminal: it
// starts the terminal probe contained, then prints what its own terminal has
// waiting to be read.
func ttyHost() int {
	dir, err := os.MkdirTemp("", "rig-redteam-tty-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	env, err := BuildEnv(dir, map[string]string{redteamProbeEnv: probeTerminal})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	logPath := filepath.Join(dir, "log")
	sb, err := StartSandbox(context.Background(), SandboxSpec{Argv: []string{os.Getenv(probeBinEnv)}, Env: env, Dir: dir, Limits: CommandLimits()}, logPath)
	if err != nil {
		fmt.Println("starting the sandbox:", err)
		return 1
	}
	select {
	case <-sb.Done():
	case <-time.After(30 * time.Second):
		sb.Kill()
	}
	fmt.Printf("the contained probe said:\n%s\n", sb.LogTail(20))
	// What was pushed into the terminal's input queue is read by whoever
	// reads the terminal next: here, this session.
	n, err := unix.IoctlGetInt(0, unix.TIOCINQ)
	if err != nil {
		fmt.Println("reading the terminal's input queue:", err)
		return 1
	}
	buf := make([]byte, 256)
	got := 0
	if n > 0 {
		_ = unix.SetNonblock(0, true)
		got, _ = unix.Read(0, buf)
		if got < 0 {
			got = 0
		}
	}
	fmt.Printf("terminal input waiting: %q (%d bytes)\n", buf[:got], n)
	return 0
}

// probeTypeIntoTerminal runs contained: it opens the controlling terminal
// and types injectedCommand into it.
func probeTypeIntoTerminal() int {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		fmt.Printf("open /dev/tty: %v\n", errors.Unwrap(err))
	} else {
		fmt.Println("open /dev/tty: ok")
		for i := 0; i < len(injectedCommand); i++ {
			b := injectedCommand[i]
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&b))); e != 0 {
				fmt.Printf("ioctl(TIOCSTI) on /dev/tty: %v\n", e)
				break
			}
		}
		f.Close()
	}
	// The filter's own answer, on a descriptor that is no terminal: the
	// kernel says ENOTTY, the filter EPERM before the kernel is asked.
	null, err := os.Open("/dev/null")
	if err == nil {
		var b byte = 'x'
		_, _, e := unix.Syscall(unix.SYS_IOCTL, null.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&b)))
		fmt.Printf("ioctl(TIOCSTI) on a descriptor that is no terminal: %v\n", e)
		null.Close()
	}
	sid, _ := unix.Getsid(0)
	fmt.Printf("session %d, process %d\n", sid, os.Getpid())
	return 0
}

// sysvKey is a System V IPC key for one test run.
func sysvKey(t *testing.T) int {
	t.Helper()
	return 0x52490000 | (os.Getpid() & 0xffff)
}

// TestRedTeamSysVIPCIsNotShared: a contained program creates a System V
// shared-memory segment and a message queue holding a message; both outlive
// their maker. The attack succeeds if the host then finds them (they add up
// until the host runs out of memory) or a later sandbox reads the message.
func TestRedTeamSysVIPCIsNotShared(t *testing.T) {
	requireSandbox(t)
	bin := probeCopy(t)
	key := sysvKey(t)
	// Whatever an unfixed sandbox leaves on the host is removed afterwards.
	t.Cleanup(func() {
		if id, err := unix.SysvShmGet(key, 0, 0); err == nil {
			_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		}
		if id, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), 0, 0); e == 0 {
			_, _, _ = unix.Syscall(unix.SYS_MSGCTL, id, unix.IPC_RMID, 0)
		}
	})
	keyEnv := map[string]string{probeKeyEnv: strconv.Itoa(key)}
	planted := runProbe(t, bin, probeIPCPlant, keyEnv)
	if !strings.Contains(planted, "shmget: ok") || !strings.Contains(planted, "msgsnd: ok") {
		t.Fatalf("the probe could not make its segment and message (a test that shows nothing):\n%s", planted)
	}
	if id, err := unix.SysvShmGet(key, 0, 0); err == nil {
		t.Errorf("the host holds the shared-memory segment a sandbox made (id %d): it outlives the sandbox", id)
	}
	if id, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), 0, 0); e == 0 {
		t.Errorf("the host holds the message queue a sandbox made (id %d)", id)
	}
	read := runProbe(t, bin, probeIPCRead, keyEnv)
	if strings.Contains(read, "message: ") {
		t.Errorf("a later sandbox read what an earlier one left:\n%s", read)
	}
	if !strings.Contains(read, "msgget: no such file or directory") {
		t.Errorf("want the later sandbox to find no queue:\n%s", read)
	}
}

// probeIPC makes (plant) or reads back (read) the segment and the message.
func probeIPC(plant bool) int {
	key, err := strconv.Atoi(os.Getenv(probeKeyEnv))
	if err != nil {
		fmt.Println("no key:", err)
		return 1
	}
	if plant {
		if _, err := unix.SysvShmGet(key, 1<<20, unix.IPC_CREAT|0o666); err != nil {
			fmt.Println("shmget:", err)
		} else {
			fmt.Println("shmget: ok")
		}
		id, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), unix.IPC_CREAT|0o666, 0)
		if e != 0 {
			fmt.Println("msgget:", e)
			return 0
		}
		msg := append([]byte{1, 0, 0, 0, 0, 0, 0, 0}, "left by an earlier sandbox"...)
		if _, _, e := unix.Syscall6(unix.SYS_MSGSND, id, uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)-8), unix.IPC_NOWAIT, 0, 0); e != 0 {
			fmt.Println("msgsnd:", e)
		} else {
			fmt.Println("msgsnd: ok")
		}
		return 0
	}
	id, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), 0, 0)
	if e != 0 {
		fmt.Println("msgget:", e)
		return 0
	}
	buf := make([]byte, 8+128)
	n, _, e := unix.Syscall6(unix.SYS_MSGRCV, id, uintptr(unsafe.Pointer(&buf[0])), 128, 0, unix.IPC_NOWAIT, 0)
	if e != 0 {
		fmt.Println("msgrcv:", e)
		return 0
	}
	fmt.Printf("message: %q\n", buf[8:8+n])
	return 0
}

// TestRedTeamNothingOfTheHostIsShared reads, from inside, every namespace
// the process is in and what it can learn of the host through them: each
// namespace must be the sandbox's own (the user namespace is the host's
// only when rig is root, which runs the contained process as another,
// unprivileged user instead), its cgroup must read as "/", the host's cgroup
// tree must be absent, and init's command line and the host name must name
// nothing of the host.
func TestRedTeamNothingOfTheHostIsShared(t *testing.T) {
	requireSandbox(t)
	bin := probeCopy(t)
	out := runProbe(t, bin, probeHostView, nil)
	t.Logf("inside:\n%s", out)
	inside := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, " = "); ok {
			inside[k] = v
		}
	}
	ents, err := os.ReadDir("/proc/self/ns")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		host, err := os.Readlink("/proc/self/ns/" + name)
		if err != nil {
			continue
		}
		got, ok := inside["ns/"+name]
		if !ok {
			t.Errorf("the probe did not read its %s namespace", name)
			continue
		}
		shared := got == host
		switch name {
		case "user":
			// As root the contained process is another user (rig-sandbox)
			// with no capabilities; a user namespace adds nothing to that.
			if shared && os.Geteuid() != 0 {
				t.Errorf("the sandbox shares the host's user namespace although rig is not root")
			}
		default:
			if shared {
				t.Errorf("the sandbox shares the host's %s namespace (%s)", name, host)
			}
		}
	}
	if v := inside["cgroup entries"]; v != "" {
		t.Errorf("the host's cgroup tree is visible inside: %s", v)
	}
	for _, line := range strings.Split(inside["/proc/self/cgroup"], ";") {
		if line != "" && !strings.HasSuffix(line, ":/") {
			t.Errorf("/proc/self/cgroup names a host group: %q", line)
		}
	}
	self, _ := os.Executable()
	if c := inside["/proc/1/cmdline"]; strings.Contains(c, "/") {
		t.Errorf("init's command line inside names a host path: %q (rig is %s)", c, self)
	}
	hostname, _ := os.Hostname()
	if inside["hostname"] == hostname {
		t.Errorf("the host's name %q is visible inside", hostname)
	}
}

// probeWhatTheHostShows prints "key = value" lines of what it can see.
func probeWhatTheHostShows() int {
	ents, _ := os.ReadDir("/proc/self/ns")
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/ns/" + e.Name())
		if err == nil {
			fmt.Printf("ns/%s = %s\n", e.Name(), l)
		}
	}
	b, _ := os.ReadFile("/proc/self/cgroup")
	fmt.Printf("/proc/self/cgroup = %s\n", strings.Join(strings.Fields(string(b)), ";"))
	var names []string
	if cg, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
		for _, e := range cg {
			names = append(names, e.Name())
		}
	}
	fmt.Printf("cgroup entries = %s\n", strings.Join(names, " "))
	cmd, _ := os.ReadFile("/proc/1/cmdline")
	fmt.Printf("/proc/1/cmdline = %s\n", strings.ReplaceAll(string(cmd), "\x00", " "))
	h, _ := os.Hostname()
	fmt.Printf("hostname = %s\n", h)
	return 0
}

// TestRedTeamSocketFamiliesInside: a contained program opens sockets of
// families that no network namespace covers. AF_VSOCK reaches a virtual
// machine's host side; AF_ALG is kernel crypto. The probe only opens them
// (it never connects, so nothing leaves the machine); the attack succeeds if
// either opens. The families rig's runtimes need still open, and the other
// calls the second round found allowed are refused.
func TestRedTeamSocketFamiliesInside(t *testing.T) {
	requireSandbox(t)
	bin := probeCopy(t)
	out := runProbe(t, bin, probeSocketKind, nil)
	want := map[string]string{
		"socket(AF_VSOCK)":               "address family not supported by protocol",
		"socket(AF_ALG)":                 "address family not supported by protocol",
		"socket(AF_PACKET)":              "address family not supported by protocol",
		"socketpair(AF_UNIX)":            "ok",
		"socket(AF_UNIX)":                "ok",
		"socket(AF_INET)":                "ok",
		"socket(AF_INET6)":               "ok",
		"socket(AF_NETLINK)":             "ok",
		"personality(READ_IMPLIES_EXEC)": "operation not permitted",
		"personality(query)":             "ok",
		"modify_ldt":                     "operation not permitted",
		"name_to_handle_at":              "operation not permitted",
	}
	for call, w := range want {
		if line := call + ": " + w; !strings.Contains(out, line) {
			t.Errorf("want %q in the probe's output", line)
		}
	}
	if t.Failed() {
		t.Logf("probe output:\n%s", out)
	}
}

// probeSocketFamilies opens one socket of each family and makes the other
// refused calls, printing what each returned.
func probeSocketFamilies() int {
	res := printProbeResult
	for _, s := range []struct {
		name       string
		family, ty int
		proto      int
	}{
		{"socket(AF_VSOCK)", unix.AF_VSOCK, unix.SOCK_STREAM, 0},
		{"socket(AF_ALG)", unix.AF_ALG, unix.SOCK_SEQPACKET, 0},
		{"socket(AF_PACKET)", unix.AF_PACKET, unix.SOCK_DGRAM, 0},
		{"socket(AF_UNIX)", unix.AF_UNIX, unix.SOCK_STREAM, 0},
		{"socket(AF_INET)", unix.AF_INET, unix.SOCK_STREAM, 0},
		{"socket(AF_INET6)", unix.AF_INET6, unix.SOCK_STREAM, 0},
		{"socket(AF_NETLINK)", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE},
	} {
		fd, err := unix.Socket(s.family, s.ty, s.proto)
		if err == nil {
			unix.Close(fd)
		}
		res(s.name, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
	}
	res("socketpair(AF_UNIX)", err)
	errOf := func(e syscall.Errno) error {
		if e == 0 {
			return nil
		}
		return e
	}
	_, _, e := unix.Syscall(unix.SYS_PERSONALITY, readImpliesExec, 0, 0)
	res("personality(READ_IMPLIES_EXEC)", errOf(e))
	_, _, e = unix.Syscall(unix.SYS_PERSONALITY, personalityQuery, 0, 0)
	res("personality(query)", errOf(e))
	buf := make([]byte, 16)
	_, _, e = unix.Syscall(unix.SYS_MODIFY_LDT, 0, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	res("modify_ldt", errOf(e))
	_, _, err = unix.NameToHandleAt(unix.AT_FDCWD, "/", 0)
	res("name_to_handle_at", err)
	return 0
}

// fillScript holds six 250 MiB files open after unlinking them (no walk of
// names sees them), then makes thousands of long symbolic links (each a
// block of the disk), then says "filled" and waits, holding everything.
const fillScript = `
import os, time
held = []
for i in range(6):
    f = open("big%d" % i, "wb")
    try:
        for _ in range(250):
            f.write(b"\0" * (1 << 20))
        f.flush()
    except OSError as e:
        print("file %d: %s" % (i, e.strerror), flush=True)
    os.unlink("big%d" % i)
    held.append(f)
target = "x" * 4000
for i in range(20000):
    try:
        os.symlink(target, "link%d" % i)
    except OSError as e:
        print("link %d: %s" % (i, e.strerror), flush=True)
        break
print("filled", flush=True)
open("filled", "w").close()
time.sleep(2)
`

// TestRedTeamScratchCapCountsWhatIsWritten: the cap on a sandbox's writable
// folders counted only the sizes of the regular files it could list, so
// files unlinked while held open and long links filled the host's disk (the
// disk of every study's store) with no limit firing. The attack succeeds if
// the disk under the sandbox's folder grows by more than the cap allows, or
// no limit is named.
func TestRedTeamScratchCapCountsWhatIsWritten(t *testing.T) {
	requireSandbox(t)
	_, err := exec.LookPath("python3")
	testenv.NeedsSetup(t, "python3 (the fill is written in it)", err)
	dir := t.TempDir()
	var before unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(dir), &before); err != nil {
		t.Fatal(err)
	}
	usedOnDisk := func() int64 {
		var now unix.Statfs_t
		if unix.Statfs(filepath.Dir(dir), &now) != nil {
			return 0
		}
		return (int64(before.Bfree) - int64(now.Bfree)) * before.Bsize
	}
	env, err := BuildEnv(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	limits := CommandLimits()
	sb, err := StartSandbox(context.Background(), SandboxSpec{Argv: []string{"python3", "-c", fillScript}, Env: env, Dir: dir, Limits: limits}, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	var peak int64
	deadline := time.After(2 * time.Minute)
watch:
	for {
		if u := usedOnDisk(); u > peak {
			peak = u
		}
		select {
		case <-sb.Done():
			break watch
		case <-deadline:
			sb.Kill()
			t.Fatalf("the fill did not end:\n%s", sb.LogTail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
	out := sb.LogTail(20)
	t.Logf("the fill said:\n%s\nthe host's disk grew by %d MiB at most; limit hit: %q", out, peak>>20, sb.LimitHit())
	// The cap plus room for whatever else this machine writes meanwhile.
	if bound := limits.ScratchBytes / 2; peak > limits.ScratchBytes+bound {
		t.Errorf("the sandbox added %d MiB to the host's disk; its scratch cap is %d MiB", peak>>20, limits.ScratchBytes>>20)
	}
	if got := sb.LimitHit(); got != "scratch_bytes" {
		t.Errorf("the limit hit reads %q, want scratch_bytes", got)
	}
	// The writes past the cap fail with ENOSPC, and the watch then ends the
	// tree; the fill may be killed before it prints what it saw, so its
	// words are not required, only the disk and the limit above.
}

// TestScratchKeepsWhatTheSandboxWrote: with the writable folders on a
// scratch filesystem while the sandbox runs, what it left must be on the
// host's disk, at the same paths, once Done is closed (rig reads a
// repository's changes then), and the scratch must be gone.
func TestScratchKeepsWhatTheSandboxWrote(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "before.txt"), []byte("rig's own"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := startContained(t, dir, `set -e
echo changed > before.txt
mkdir -p sub/deeper && echo deep > sub/deeper/file
ln -s /etc/shadow sub/link
mkfifo pipe
echo run > prog && chmod 4755 prog
echo to-stderr-by-name >&2
echo gone > /dev/null
cat <<HERE
a here-document, which bash writes into /tmp
HERE
echo ok`, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := waitDone(t, sb)
	if err := sb.ExitError(); err != nil {
		t.Fatalf("the script failed: %v\n%s", err, out)
	}
	for _, want := range []string{"to-stderr-by-name", "a here-document"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the log:\n%s", want, out)
		}
	}
	if landlockABI() > 0 && sb.Containment.Confinement.Landlock == "" {
		t.Errorf("the kernel has Landlock but the confinement names none: %s", sb.Containment.Confinement.Summary())
	}
	read := func(p string) string { b, _ := os.ReadFile(filepath.Join(dir, p)); return string(b) }
	if got := read("before.txt"); got != "changed\n" {
		t.Errorf("before.txt reads %q after the run, want the sandbox's edit", got)
	}
	if got := read("sub/deeper/file"); got != "deep\n" {
		t.Errorf("sub/deeper/file reads %q", got)
	}
	if l, err := os.Readlink(filepath.Join(dir, "sub/link")); err != nil || l != "/etc/shadow" {
		t.Errorf("the link reads %q, %v; want it copied as a link", l, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "pipe")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO is not there as a FIFO: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "prog")); err != nil || fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("prog: %v, %v; want mode 0755 without setuid", fi.Mode(), err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), dir) {
		t.Errorf("the scratch is still mounted over %s", dir)
	}
}
