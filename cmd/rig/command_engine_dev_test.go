package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/runtimes"
)

// asRigEnv makes this test binary run as rig: a test re-executes itself
// with it set to rig's arguments, so that the process under test is rig's
// main (its exit status, its signal handling) without building a binary.
const asRigEnv = "RIG_TEST_AS_RIG"

// runAsRig runs main with the arguments asRigEnv holds and exits as rig
// would; it returns at once where asRigEnv is not set.
func runAsRig() {
	args := os.Getenv(asRigEnv)
	if args == "" {
		return
	}
	os.Args = append([]string{"rig"}, strings.Fields(args)...)
	main()
	os.Exit(0)
}

// engineDev is `rig engine dev` running in a child process, up and
// listening, and the pid of the Temporal server it started.
type engineDev struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	log    string // the server's log file
	server int    // the temporal server's pid
	exited chan error
}

func startEngineDev(t *testing.T, testName string) *engineDev {
	t.Helper()
	testenv.Long(t, "starts the real Temporal dev server")
	in, err := provision.Load()
	if err == nil && in.Temporal == "" {
		err = errors.New("installed.env names no TEMPORAL_BIN")
	}
	testenv.NeedsSetup(t, "the Temporal CLI", err)
	port, err := runtimes.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "temporal.db")
	e := &engineDev{stderr: &bytes.Buffer{}, log: db + ".log", exited: make(chan error, 1)}
	e.cmd = exec.Command(os.Args[0], "-test.run=^"+testName+"$")
	e.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=engine dev --db %s --port %d --installed-env %s", asRigEnv, db, port, provision.Path()))
	e.cmd.Stderr = e.stderr
	stdout, err := e.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "temporal dev server on ") {
				up <- sc.Text()
			}
		}
		e.exited <- e.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = e.cmd.Process.Kill() // an error once it has exited
		if e.server != 0 {
			_ = syscall.Kill(-e.server, syscall.SIGKILL)
		}
	})
	select {
	case <-up:
	case err := <-e.exited:
		t.Fatalf("rig engine dev exited before its server was up (%v): %s", err, e.stderr)
	case <-time.After(90 * time.Second):
		t.Fatalf("rig engine dev did not say its server was up within 90 s: %s", e.stderr)
	}
	e.server = childOf(t, e.cmd.Process.Pid)
	return e
}

// childOf is the pid of pid's only child process.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	var children []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after ")".
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			children = append(children, p)
		}
	}
	if len(children) != 1 {
		t.Fatalf("rig engine dev (pid %d) has %d child processes, want its one server: %v", pid, len(children), children)
	}
	return children[0]
}

// wait is rig engine dev's exit status, once it has exited.
func (e *engineDev) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-e.exited:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return e.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("rig engine dev still runs 30 s after its server died or it was told to stop: %s", e.stderr)
		return 0
	}
}

// TestEngineDevFailsWhenItsServerDies: a server killed from outside (here
// kill -9) makes rig engine dev exit non-zero with an error naming how the
// server ended and quoting its log, so a supervisor restarting on failure
// restarts it.
func TestEngineDevFailsWhenItsServerDies(t *testing.T) {
	runAsRig()
	e := startEngineDev(t, "TestEngineDevFailsWhenItsServerDies")
	if err := syscall.Kill(e.server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := e.wait(t); code == 0 {
		t.Fatalf("rig engine dev exited 0 after its server was killed; stderr: %s", e.stderr)
	}
	msg := e.stderr.String()
	for _, want := range []string{"rig: the temporal dev server on 127.0.0.1:", "exited (signal: killed", e.log} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr lacks %q:\n%s", want, msg)
		}
	}
	log, err := os.ReadFile(e.log)
	if err != nil {
		t.Fatal(err)
	}
	if last := lastLogLine(string(log)); last == "" {
		if !strings.Contains(msg, "it wrote nothing to its log") {
			t.Errorf("the server's log is empty and stderr does not say so:\n%s", msg)
		}
	} else if !strings.Contains(msg, last) {
		t.Errorf("stderr does not quote the server's last log line %q:\n%s", last, msg)
	}
}

// TestEngineDevStopsCleanlyOnSIGTERM: rig's own shutdown is no failure: the
// server is stopped and rig engine dev exits 0.
func TestEngineDevStopsCleanlyOnSIGTERM(t *testing.T) {
	runAsRig()
	e := startEngineDev(t, "TestEngineDevStopsCleanlyOnSIGTERM")
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := e.wait(t); code != 0 {
		t.Fatalf("rig engine dev exited %d on SIGTERM; stderr: %s", code, e.stderr)
	}
	if err := syscall.Kill(e.server, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server (pid %d) outlived rig engine dev's clean exit (kill 0: %v)", e.server, err)
	}
}

func lastLogLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
