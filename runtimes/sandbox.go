package runtimes

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rig/internal/cgroup"
)

// The sandbox is rig re-executing itself in three stages:
//
//	rig (parent) ── clone(CLONE_NEWNET[|CLONE_NEWUSER]) ──> init stage
//	init: lo up, containment read through netlink (refuse unless loopback only),
//	      unix-socket forwarders between the host filesystem and 127.0.0.1 inside,
//	      then starts the exec stage, drops its own rights (dropInitRights) and
//	      forwards signals to it; outbound connections it receives from rig
//	      already made (forward.go), so it never dials a path
//	exec: joins the memory cgroup, then execve()s the runtime, so the runtime's
//	      whole process tree is charged to the cgroup from its first page
//
// rig reaches a server inside only through a unix socket on the filesystem, so
// no TCP port is ever opened where the host network could see it. The stages are
// selected by an environment variable read in this package's init(), so the
// same mechanism works in the rig binary and in test binaries.
const (
	stageEnv = "_RIG_SANDBOX_STAGE"
	specEnv  = "_RIG_SANDBOX_SPEC"

	// The names the stages run under, and the host name inside: what a
	// contained process reads of them tells it nothing about the host.
	initProcessName = "rig-sandbox-init"
	execProcessName = "rig-sandbox-exec"
	sandboxHostname = "rig-sandbox"
)

func init() {
	switch os.Getenv(stageEnv) {
	case "init":
		os.Exit(sandboxInit())
	case "exec":
		os.Exit(sandboxExec())
	}
}

// ErrNoSandbox means namespaces could not be made here; rig then refuses to run
// an arm unless the user passes --no-sandbox, which every receipt records.
var ErrNoSandbox = errors.New("cannot create a network namespace here (run as root or enable unprivileged user namespaces, or pass --no-sandbox, which every receipt records)")

// Forward connects a unix socket on the host filesystem with a TCP port on
// 127.0.0.1 inside the sandbox.
type Forward struct {
	Socket string `json:"socket"`
	Port   int    `json:"port"`
}

// SandboxSpec describes one process to run contained.
type SandboxSpec struct {
	Argv      []string  `json:"argv"`
	Env       []string  `json:"env"` // final environment, from BuildEnv
	Dir       string    `json:"dir"`
	CgroupDir string    `json:"cgroup_dir,omitempty"`
	Inbound   []Forward `json:"inbound,omitempty"`  // host socket -> server port inside
	Outbound  []Forward `json:"outbound,omitempty"` // port inside -> host socket (Aider to its arm)
	NoSandbox bool      `json:"no_sandbox,omitempty"`
	// GPU binds the host's GPU device nodes (/dev/nvidia*, /dev/dri) into
	// the sandbox. A launcher sets it only when its offload pin puts layers
	// on a card; everything else (a grader's tests, Aider, a CPU runtime)
	// never sees a card.
	GPU bool `json:"gpu,omitempty"`
	// ReadOnly and Writable are the host paths the contained process sees
	// besides the system folders (see systemDirs): the model file and the
	// runtime's install folder read-only, its scratch folders read-write. Dir
	// is always writable. The install folders of Argv[0] (and of a script's
	// interpreter) are added by StartSandbox.
	ReadOnly []string `json:"read_only,omitempty"`
	Writable []string `json:"writable,omitempty"`
	Limits   Limits   `json:"limits"`

	// Set by StartSandbox, not by callers.
	ParentNS      string `json:"parent_ns"`
	UserNS        bool   `json:"user_ns,omitempty"`
	Root          string `json:"root,omitempty"` // empty host folder the contained root is mounted on
	PidsCgroupDir string `json:"pids_cgroup_dir,omitempty"`
	SandboxUID    int    `json:"sandbox_uid,omitempty"`
	SandboxGID    int    `json:"sandbox_gid,omitempty"`
	SandboxUser   string `json:"sandbox_user,omitempty"`
	// AddDummyInterface makes the init stage add a dummy (non-loopback) interface
	// before its check: the containment self-test uses it to show the check fails
	// closed. A dummy interface carries no traffic anywhere.
	AddDummyInterface bool `json:"add_dummy_interface,omitempty"`
}

// Sandbox is a running contained process tree.
type Sandbox struct {
	Containment Containment
	RuntimePID  int
	// OnCard is set by a launcher whose runtime holds the model on a card
	// (an offload pin that puts layers there): the governor then holds the
	// trial to its runtime's own card memory and measures its energy.
	OnCard   bool
	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	logPath  string
	log      *os.File // the log, read back through the descriptor opened when it was created (closed with the Sandbox by the runtime's finalizer)
	limits   *treeLimits
	limitHit string
}

type initStatus struct {
	OK          bool        `json:"ok"`
	Error       string      `json:"error,omitempty"`
	RuntimePID  int         `json:"runtime_pid"`
	Containment Containment `json:"containment"`
	Confining   bool        `json:"confining,omitempty"` // the error came from building the contained world
}

// StartSandbox starts spec.Argv contained and returns once the containment
// checks have passed and the process runs. Contained means: its own network
// namespace holding only loopback, its own PID and mount namespaces with the
// host read-only or absent except the job's paths, an unprivileged identity
// with no_new_privs, and spec.Limits. The process's output goes to logPath.
func StartSandbox(ctx context.Context, spec SandboxSpec, logPath string) (*Sandbox, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("sandbox: nothing to run")
	}
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	var limits *treeLimits
	if !spec.NoSandbox {
		var err error
		if limits, err = prepareContainedWorld(ctx, &spec); err != nil {
			return nil, err
		}
		cleanups = append(cleanups, limits.close)
		if err := checkForwardPlaces(spec); err != nil {
			cleanup()
			return nil, err
		}
	} else {
		bin, err := exec.LookPath(spec.Argv[0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w (run make setup, or check `rig runtimes check`)", spec.Argv[0], ErrBinaryMissing)
		}
		if bin, err = filepath.Abs(bin); err != nil {
			return nil, err
		}
		spec.Argv = append([]string{bin}, spec.Argv[1:]...)
	}
	sb, err := startStages(ctx, spec, logPath, limits)
	if err != nil {
		cleanup()
		return nil, err
	}
	go func() { <-sb.done; cleanup() }()
	return sb, nil
}

func startStages(ctx context.Context, spec SandboxSpec, logPath string, limits *treeLimits) (*Sandbox, error) {
	for _, f := range spec.Inbound {
		if err := claimSocket(f.Socket); err != nil {
			return nil, err
		}
	}
	broker, brokerEnd, err := newOutboundBroker(spec.Outbound)
	if err != nil {
		return nil, err
	}
	defer brokerEnd.Close()
	started := false
	defer func() {
		if !started {
			broker.close()
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: finding rig's own executable: %w", err)
	}
	spec.ParentNS, _ = os.Readlink("/proc/self/ns/net")
	spec.UserNS = !spec.NoSandbox && os.Geteuid() != 0
	blob, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	logf, logRead, err := createLog(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusR.Close()

	cmd := initCommand(self, spec, blob, logf, statusW, brokerEnd)
	if err := cmd.Start(); err != nil {
		statusW.Close()
		logRead.Close()
		if !spec.NoSandbox && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
			return nil, fmt.Errorf("sandbox: %v: %w", err, ErrNoSandbox)
		}
		return nil, fmt.Errorf("sandbox: starting: %w", err)
	}
	statusW.Close()
	brokerEnd.Close()
	started = true
	go broker.serve()
	sb := &Sandbox{cmd: cmd, done: make(chan struct{}), logPath: logPath, log: logRead, limits: limits}
	go sb.reapInit(broker, spec, limits)

	stCh := readInitStatus(statusR, logPath)
	select {
	case st := <-stCh:
		return sb.acceptInitStatus(st, spec, limits)
	case <-ctx.Done():
		sb.Kill()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		sb.Kill()
		return nil, fmt.Errorf("sandbox: init did not report within 30s; see %s", logPath)
	}
}

// initCommand is the init stage's command: rig itself, under init's name,
// with the status pipe and the outbound broker's end as fds 3 and 4.
func initCommand(self string, spec SandboxSpec, blob []byte, logf, statusW, brokerEnd *os.File) *exec.Cmd {
	cmd := exec.Command(self)
	// The name a contained process reads in /proc/1/cmdline: not rig's
	// path on the host.
	cmd.Args = []string{initProcessName}
	cmd.Env = []string{stageEnv + "=init", specEnv + "=" + string(blob)}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{statusW, brokerEnd} // fds 3 and 4 in init
	// A session of its own, so no controlling terminal: a contained process
	// that opened rig's terminal could push keystrokes into the shell that
	// started rig (TIOCSTI). The session's id is init's pid, and so is its
	// process group's, which Stop and Kill signal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if !spec.NoSandbox {
		// init is PID 1 of a fresh PID namespace: when it ends, the kernel
		// ends everything the runtime started, wherever it moved itself.
		// Its own IPC namespace keeps System V shared memory, semaphores and
		// message queues (which outlive their makers) off the host's and
		// other sandboxes'; its own UTS namespace keeps the host's name.
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		if spec.UserNS {
			// Root of the new user namespace is rig's own uid outside, so the
			// stages may mount; the exec stage drops every capability.
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		}
	}
	return cmd
}

// reapInit waits for init to end, tidies what it leaves behind and closes
// s.done.
func (s *Sandbox) reapInit(broker *outboundBroker, spec SandboxSpec, limits *treeLimits) {
	s.waitErr = s.cmd.Wait()
	broker.close()
	// init made the inbound sockets in rig's own folder and, having
	// dropped its rights, cannot remove them itself.
	for _, f := range spec.Inbound {
		_ = os.Remove(f.Socket)
	}
	if limits != nil {
		s.limitHit = limits.hit(s.waitErr)
		if err := limits.releaseScratch(); err != nil && s.waitErr == nil {
			s.waitErr = err
		}
	}
	close(s.done)
}

// readInitStatus delivers the one status line init writes, or a stand-in
// pointing at the log when init ends without one.
func readInitStatus(statusR *os.File, logPath string) <-chan initStatus {
	stCh := make(chan initStatus, 1)
	go func() {
		var st initStatus
		line, err := bufio.NewReader(statusR).ReadBytes('\n')
		if err != nil || json.Unmarshal(line, &st) != nil {
			st = initStatus{Error: "sandbox init ended before reporting; see " + logPath}
		}
		stCh <- st
	}()
	return stCh
}

// acceptInitStatus takes init's report: a refusal kills the sandbox and
// becomes the error; success learns the runtime's host pid and starts
// watching the limits.
func (s *Sandbox) acceptInitStatus(st initStatus, spec SandboxSpec, limits *treeLimits) (*Sandbox, error) {
	s.Containment = st.Containment
	s.RuntimePID = st.RuntimePID
	if !st.OK {
		s.Kill()
		if len(st.Containment.Violations) > 0 {
			return nil, fmt.Errorf("%w: %s; refusing to start %s", ErrNotContained, strings.Join(st.Containment.Violations, "; "), filepath.Base(spec.Argv[0]))
		}
		if st.Confining {
			return nil, fmt.Errorf("sandbox: %s: %w", st.Error, ErrNoSandbox)
		}
		return nil, fmt.Errorf("sandbox: %s", st.Error)
	}
	if !spec.NoSandbox {
		// init reported the runtime's pid as its own namespace numbers it;
		// signals and memory readings from here need the host's number.
		// A runtime that exits at once (a short command) can be reaped by
		// init before its number is read; then there is nothing left to
		// signal or measure, and RuntimePID stays 0.
		pid, err := hostChildPID(s.cmd.Process.Pid, s.done)
		switch {
		case err == nil:
			s.RuntimePID = pid
		case errors.Is(err, errRuntimeGone):
			s.RuntimePID = 0
		default:
			s.Kill()
			return nil, fmt.Errorf("sandbox: finding the runtime's host pid: %w", err)
		}
		if limits != nil {
			limits.watch(s)
		}
	}
	return s, nil
}

// claimSocket refuses a socket path that a live server still answers on, and
// removes a stale one left by a crash.
func claimSocket(path string) error {
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("%s: %w: another server is listening there (stop it, or use another work directory)", path, ErrBusy)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: removing a stale socket: %w", path, err)
	}
	return os.MkdirAll(filepath.Dir(path), 0o700)
}

// Done is closed when the whole sandbox (init and runtime) has exited.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// exitedWithin reports whether the sandbox ends within d. A connection that
// breaks mid-call is a crash only if the process is going away; the forwarder
// closes the connection a moment before init is reaped.
func (s *Sandbox) exitedWithin(d time.Duration) bool {
	select {
	case <-s.done:
		return true
	case <-time.After(d):
		return false
	}
}

// ExitError is the sandbox's exit status once Done is closed.
func (s *Sandbox) ExitError() error { <-s.done; return s.waitErr }

// Stop asks the runtime to end (SIGTERM to the process group), then kills the
// group after grace. It returns once everything has exited.
func (s *Sandbox) Stop(grace time.Duration) {
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(grace):
		s.Kill()
	}
	// The runtime may have started helpers in the group that outlive init.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// Kill ends the whole process group at once and waits for init.
func (s *Sandbox) Kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Signal sends sig to the runtime process alone (fault injection uses SIGSTOP).
func (s *Sandbox) Signal(sig syscall.Signal) error {
	if s.RuntimePID <= 0 {
		// Kill(0, …) would signal rig's own process group.
		return fmt.Errorf("sandbox: the runtime has already exited")
	}
	return syscall.Kill(s.RuntimePID, sig)
}

// LogPath is where a runtime of kind started in workDir writes its log: a
// caller can read what it said even when it failed to start.
func LogPath(workDir, kind string) string { return filepath.Join(workDir, kind+".log") }

// LogPath is the file the sandboxed process's output goes to.
func (s *Sandbox) LogPath() string { return s.logPath }

// LogTail returns the last lines of the sandbox's log, for error messages,
// read from the file the sandbox wrote whatever its path now names.
func (s *Sandbox) LogTail(n int) string { return readTail(s.log, n) }

// sandboxInit runs inside the new namespace.
func sandboxInit() int {
	unix.CloseOnExec(3)
	status := os.NewFile(3, "status")
	report := func(st initStatus) {
		b, _ := json.Marshal(st)
		status.Write(append(b, '\n'))
	}
	var spec SandboxSpec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &spec); err != nil {
		report(initStatus{Error: "bad sandbox spec: " + err.Error()})
		return 96
	}
	cont, failed := checkInitNetwork(spec)
	if failed != nil {
		report(*failed)
		return 97
	}
	cont.ParentNetNS = spec.ParentNS
	cont.CgroupJoined = spec.CgroupDir
	cont.EnvironmentSet = envNames(spec.Env)

	dialer, err := newOutboundDialer(os.NewFile(4, "forward-init"))
	if err != nil {
		report(initStatus{Containment: cont, Error: err.Error()})
		return 98
	}
	listeners, err := startInitForwarders(spec, dialer)
	if err != nil {
		report(initStatus{Containment: cont, Error: err.Error()})
		return 98
	}
	child, confR, err := startExecStage(spec)
	if err != nil {
		report(initStatus{Containment: cont, Error: err.Error()})
		return 98
	}
	// The exec stage has its own copy of init's rights and mount view; init
	// needs neither any longer.
	if err := dropInitRights(spec); err != nil {
		_ = child.Process.Kill()
		_ = child.Wait()
		report(initStatus{Containment: cont, Error: "dropping init's rights: " + err.Error(), Confining: true})
		return 98
	}
	if confR != nil {
		confinement, failure := readExecConfinement(child, confR)
		if confinement == nil {
			_ = child.Process.Kill()
			_ = child.Wait()
			report(initStatus{Containment: cont, Error: "confining the process: " + failure, Confining: true})
			return 98
		}
		cont.Confinement = confinement
	}
	report(initStatus{OK: true, RuntimePID: child.Process.Pid, Containment: cont})
	status.Close()
	return relayUntilRuntimeExits(child, listeners)
}

// checkInitNetwork names init's host, brings up its network and reads back
// what contains it. A non-nil status is the failure to report (exit 97).
func checkInitNetwork(spec SandboxSpec) (Containment, *initStatus) {
	if spec.NoSandbox {
		cont := Containment{Sandboxed: false}
		cont.NetNS, _ = os.Readlink("/proc/self/ns/net")
		return cont, nil
	}
	if err := unix.Sethostname([]byte(sandboxHostname)); err != nil {
		return Containment{}, &initStatus{Error: "naming the sandbox's host: " + err.Error()}
	}
	if err := bringLoopbackUp(); err != nil {
		return Containment{}, &initStatus{Error: err.Error()}
	}
	if spec.AddDummyInterface {
		if err := addDummyInterface(); err != nil {
			return Containment{}, &initStatus{Error: err.Error()}
		}
	}
	cont, err := readContainment()
	if err != nil {
		return Containment{}, &initStatus{Error: err.Error()}
	}
	cont.UserNamespace = spec.UserNS
	if cont.NetNS == spec.ParentNS {
		cont.Violations = append(cont.Violations, "the sandbox shares rig's own network namespace")
		cont.LoopbackOnly = false
	}
	if !cont.LoopbackOnly {
		return cont, &initStatus{Containment: cont, Error: "not loopback-only"}
	}
	return cont, nil
}

// startInitForwarders opens the inbound sockets and outbound ports and serves
// each from its own goroutine; the listeners stay open until the runtime ends.
func startInitForwarders(spec SandboxSpec, dialer *outboundDialer) ([]net.Listener, error) {
	var listeners []net.Listener
	// The sockets init makes are rig's alone from the moment they exist; the
	// mask goes back before the exec stage, whose mount points must stay
	// open to the contained user.
	umask := syscall.Umask(0o077)
	for _, f := range spec.Inbound {
		l, err := net.Listen("unix", f.Socket)
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %v", f.Socket, err)
		}
		// rig removes the file once the sandbox ends; init may no longer.
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		listeners = append(listeners, l)
		addr := "127.0.0.1:" + strconv.Itoa(f.Port)
		go serveForward(l, func() (net.Conn, error) { return net.Dial("tcp", addr) })
	}
	syscall.Umask(umask)
	for i, f := range spec.Outbound {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(f.Port))
		if err != nil {
			return nil, fmt.Errorf("listening on 127.0.0.1:%d: %v", f.Port, err)
		}
		listeners = append(listeners, l)
		go serveForward(l, func() (net.Conn, error) { return dialer.dial(i) })
	}
	return listeners, nil
}

// startExecStage starts the exec stage. Sandboxed, it also returns the read
// end of the pipe on which the stage reports its confinement.
func startExecStage(spec SandboxSpec) (*exec.Cmd, *os.File, error) {
	self, _ := os.Executable()
	child := exec.Command(self)
	child.Args = []string{execProcessName}
	child.Env = []string{stageEnv + "=exec", specEnv + "=" + os.Getenv(specEnv)}
	child.Stdin, child.Stdout, child.Stderr = nil, os.Stdout, os.Stderr
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var confR *os.File
	if !spec.NoSandbox {
		// The exec stage builds its world in a mount namespace of its own, so
		// init keeps the host's view for the forwarders' sockets.
		child.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		child.ExtraFiles = []*os.File{w}
		confR = r
	}
	if err := child.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting the runtime: %w", err)
	}
	return child, confR, nil
}

// readExecConfinement reads the exec stage's confinement report. A nil
// confinement comes with the reason the stage gave, or a stand-in when it
// ended without a word.
func readExecConfinement(child *exec.Cmd, confR *os.File) (*Confinement, string) {
	child.ExtraFiles[0].Close()
	var cs confineStatus
	line, err := bufio.NewReader(confR).ReadBytes('\n')
	confR.Close()
	if err != nil || json.Unmarshal(line, &cs) != nil {
		cs.Error = "the exec stage ended before reporting its confinement"
	}
	return cs.Confinement, cs.Error
}

// relayUntilRuntimeExits passes rig's signals on to the runtime, waits for it
// and returns the exit code init should end with.
func relayUntilRuntimeExits(child *exec.Cmd, listeners []net.Listener) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			_ = child.Process.Signal(s)
		}
	}()
	err := child.Wait()
	for _, l := range listeners {
		l.Close()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 99
	}
	return 0
}

// dropInitRights leaves init, once the exec stage is started, with nothing a
// contained process could borrow. It is non-dumpable, so nothing inside may
// ptrace it or open its /proc entries (its root there is the host's). As root
// it becomes the sandbox user with no groups and no capabilities; the
// forwarders need no rights (rig dials the outbound sockets, see forward.go).
// In a user namespace (rig not root) only rig's own uid is mapped, so init
// keeps it; its capabilities reach only the sandbox's own network and PID
// namespaces.
func dropInitRights(spec SandboxSpec) error {
	if spec.NoSandbox {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_DUMPABLE: %w", err)
	}
	if spec.UserNS {
		return nil
	}
	// Go applies these to every thread of the process.
	if err := syscall.Setgroups([]int{spec.SandboxGID}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(spec.SandboxGID, spec.SandboxGID, spec.SandboxGID); err != nil {
		return fmt.Errorf("setresgid %d: %w", spec.SandboxGID, err)
	}
	if err := syscall.Setresuid(spec.SandboxUID, spec.SandboxUID, spec.SandboxUID); err != nil {
		return fmt.Errorf("setresuid %d: %w", spec.SandboxUID, err)
	}
	// A change of uid clears the parent-death signal; init must still end
	// with rig. This runs on the main thread (package init keeps the main
	// goroutine there), the one the kernel signals.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_PDEATHSIG: %w", err)
	}
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) // a change of uid resets it too
}

// confineStatus is the exec stage's one line to init: its confinement as read
// back, or why it could not be built.
type confineStatus struct {
	Confinement *Confinement `json:"confinement,omitempty"`
	Error       string       `json:"error,omitempty"`
}

// sandboxExec joins the cgroups, confines itself and becomes the runtime.
func sandboxExec() int {
	// Rights that are per thread (no_new_privs, capabilities) must be set on
	// the thread that calls execve.
	runtime.LockOSThread()
	var spec SandboxSpec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "rig sandbox: bad spec:", err)
		return 96
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "rig sandbox:", err)
		if !spec.NoSandbox {
			b, _ := json.Marshal(confineStatus{Error: err.Error()})
			_, _ = os.NewFile(3, "confinement").Write(append(b, '\n'))
		}
		return 95
	}
	for i, dir := range []string{spec.CgroupDir, spec.PidsCgroupDir} {
		if dir == "" || (i == 1 && dir == spec.CgroupDir) {
			continue
		}
		if err := cgroup.Join(dir, os.Getpid()); err != nil {
			return fail(err)
		}
	}
	if !spec.NoSandbox {
		// A cgroup namespace rooted at the groups just joined: the process
		// reads its own group as "/" in /proc/self/cgroup, not the host's
		// path to it (confine also hides the host's cgroup tree).
		if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
			return fail(fmt.Errorf("a cgroup namespace: %w", err))
		}
		// A time namespace with no offsets: the clocks read the same, and
		// the runtime enters it at execve, so nothing inside shares one
		// with the host. Kernels before 5.6 have none.
		if err := unix.Unshare(unix.CLONE_NEWTIME); err != nil && !errors.Is(err, unix.EINVAL) {
			return fail(fmt.Errorf("a time namespace: %w", err))
		}
	}
	if spec.NoSandbox {
		if spec.Dir != "" {
			if err := os.Chdir(spec.Dir); err != nil {
				return fail(err)
			}
		}
	} else {
		conf, err := confine(spec)
		if err != nil {
			return fail(err)
		}
		b, _ := json.Marshal(confineStatus{Confinement: conf})
		st := os.NewFile(3, "confinement")
		_, _ = st.Write(append(b, '\n'))
		st.Close()
	}
	err := syscall.Exec(spec.Argv[0], spec.Argv, spec.Env)
	fmt.Fprintln(os.Stderr, "rig sandbox: exec:", err)
	return 126
}

// PID is the sandbox's init process, the leader of the process group that
// holds the runtime; stopping the group stops everything the runtime started.
func (s *Sandbox) PID() int { return s.cmd.Process.Pid }

// socketPath names the socket called name of a runtime working in dir.
// Sockets live in rig's own folder (socketFolder), never in dir: dir is bound
// into the sandbox, where the contained process could swap a socket for a
// link that rig would then follow. The name is made from dir, so it stays
// unique.
func socketPath(dir, name string) (string, error) {
	folder, err := socketFolder()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(filepath.Join(dir, name)))
	p := filepath.Join(folder, hex.EncodeToString(sum[:8])+"-"+name)
	if len(p) >= 108 {
		return "", fmt.Errorf("socket path %s is longer than a unix socket address allows (108 bytes): set TMPDIR to a shorter folder", p)
	}
	return p, nil
}

// socketFolder is rig-sock-<uid> under the temporary folder, when that is a
// real folder (not a link) of rig's own user with mode 0700. Anyone may make
// that name first in a shared /tmp; then rig takes a fresh folder of random
// name instead, and never follows or changes what someone else left there.
func socketFolder() (string, error) {
	uid := os.Geteuid()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("rig-sock-%d", uid))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("socket folder %s: %w", dir, err)
	}
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && fi.Mode().Perm() == 0o700 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
			return dir, nil
		}
	}
	fresh, err := os.MkdirTemp("", fmt.Sprintf("rig-sock-%d-", uid))
	if err != nil {
		return "", fmt.Errorf("socket folder: %s belongs to someone else, and a fresh one could not be made: %w", dir, err)
	}
	return fresh, nil
}
