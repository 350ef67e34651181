package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/receipts"
)

// TestDaemonKilledDuringPreemption hangs a running trial's llama-server with
// SIGSTOP, which the daemon's governor catches as a hung runtime and
// preempts, and kills the daemon with SIGKILL in the middle of that
// preemption, twice: the moment the preempt event reaches the daemon log
// (the governor's stop of the runtime is under way and, in practice, the
// trial's receipt is not yet written), and just after the preempted receipt
// is stored (before the rerun). After each restart the execution resumes. At
// the end every planned trial has exactly one counted receipt, the counted
// one began after the preemption, a stored preempted receipt is not counted
// and is followed by the counted attempt, both preempt events are in the
// study's store, and no runtime process, the stopped one included, outlived
// the daemon that started it.
func TestDaemonKilledDuringPreemption(t *testing.T) {
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "preempt-kill"
	e.prepare(smallDesign(t, name, 6, false), name)
	e.rig(true, "study", "run", name, "--detach")

	// Kill at the first sign of the preemption.
	early := e.hangRunningTrial()
	t.Logf("killing the daemon at the preempt event of %s; the stopped llama-server is %s", early.trial, stateName(early.pid))
	e.killDaemon()
	e.requireNoRuntimes(early.pid)
	e.startDaemon()

	// Kill once the preemption is marked in the store.
	late := e.hangRunningTrial()
	if r, ok := e.waitReceipt(name, late); !ok {
		t.Fatalf("no preempted receipt for %s within a minute", late.trial)
	} else if r.Outcome != receipts.Preempted {
		t.Fatalf("the preempted call %s was stored as %s", late.trial, r.Outcome)
	}
	t.Logf("killing the daemon after the preempted receipt of %s; the stopped llama-server is %s", late.trial, stateName(late.pid))
	e.killDaemon()
	e.requireNoRuntimes(late.pid)
	e.startDaemon()

	_, planned := e.waitEveryTrialDone(name, 20*time.Minute, nil)
	check := e.rig(true, "study", "check", name)
	counted := regexp.MustCompile(`store ok: .*\((\d+) counted\)`).FindStringSubmatch(check)
	if counted == nil || counted[1] != strconv.Itoa(planned) {
		t.Fatalf("counted receipts != %d planned trials:\n%s", planned, check)
	}

	byTrial := map[receipts.TrialKey][]receipts.Receipt{}
	for _, r := range e.receipts(name) {
		byTrial[r.Trial()] = append(byTrial[r.Trial()], r)
	}
	if len(byTrial) != planned {
		t.Errorf("receipts name %d trials, planned %d", len(byTrial), planned)
	}
	for k, rs := range byTrial {
		n := 0
		for _, r := range rs {
			if r.Outcome.Counted() {
				n++
			}
		}
		if n != 1 {
			t.Errorf("trial %s has %d counted receipts, want exactly 1: %+v", k, n, rs)
		}
	}

	for i, p := range []preemption{early, late} {
		markedBeforeKill := i == 1
		var own *receipts.Receipt // the receipt of the very call the governor stopped
		var scored []receipts.Receipt
		for _, r := range byTrial[p.key] {
			// An attempt number can be stored by a later call when the
			// daemon died before this one's receipt: the call that was
			// stopped is the one that spans the preemption.
			if r.Attempt == p.attempt && r.StartedAt.Before(p.at) && !r.FinishedAt.Before(p.at) {
				own = &r
			}
			// A receipt written on resume from the stored preempt event
			// carries the event's time as both start and finish.
			if r.Attempt == p.attempt && r.Outcome == receipts.Preempted && strings.Contains(r.Detail, "written on resume") {
				own = &r
			}
			if r.Outcome.Counted() {
				scored = append(scored, r)
			}
		}
		if len(scored) != 1 {
			continue // reported above
		}
		c := scored[0]
		t.Logf("%s (stopped llama-server %d): counted as attempt %d (parent %d), started %s after the preemption",
			p.trial, p.pid, c.Attempt, c.ParentAttempt, c.StartedAt.Sub(p.at).Round(time.Millisecond))
		// The counted result comes from a rerun begun after the preemption,
		// never from the call the governor stopped.
		if !c.StartedAt.After(p.at) {
			t.Errorf("%s: counted attempt %d started at %s, before the preemption at %s: the preempted call was scored",
				p.trial, c.Attempt, c.StartedAt.Format(time.RFC3339Nano), p.at.Format(time.RFC3339Nano))
		}
		switch {
		case own != nil:
			if own.Outcome != receipts.Preempted || !strings.Contains(own.Detail, "hung-runtime") {
				t.Errorf("%s: the stopped call's receipt is %s (%q), want preempted by hung-runtime", p.trial, own.Outcome, own.Detail)
			}
			if c.Attempt <= own.Attempt || c.ParentAttempt < own.Attempt {
				t.Errorf("%s: counted attempt %d (parent %d) does not follow the preempted attempt %d", p.trial, c.Attempt, c.ParentAttempt, own.Attempt)
			}
		case markedBeforeKill:
			t.Errorf("%s: the preempted receipt seen before the kill is gone: %+v", p.trial, byTrial[p.key])
		default:
			// The daemon died between the preemption and the receipt; on
			// resume the execution writes the receipt from the stored
			// governor event, so the stopped call is still marked.
			t.Errorf("%s: no receipt marks the stopped call as preempted: %+v", p.trial, byTrial[p.key])
		}
	}

	e.stopDaemon()
	if left := e.runtimeProcs(); len(left) > 0 {
		t.Errorf("runtime processes left after the daemon stopped: %v", left)
	}

	// Both preemptions are in the study's store, even the one whose daemon
	// died before its receipt: the log shows only what the store holds.
	st, err := receipts.Open(filepath.Join(e.home, "studies", name, "store.bolt"), name)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.GovernorEvents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []preemption{early, late} {
		found := false
		for _, ev := range evs {
			d := ev.At.Sub(p.at)
			found = found || (ev.Kind == "preempt" && ev.Trial == p.trial && ev.ExecutionID == "exec-1" && d > -time.Second && d < time.Second)
		}
		if !found {
			t.Errorf("no stored preempt event for %s at %s among %d governor events", p.trial, p.at.Format(time.RFC3339Nano), len(evs))
		}
	}
}

// preemption is one preempt event from the daemon log.
type preemption struct {
	trial   string // the call id the governor named: arm/job/task/repeat#attempt
	key     receipts.TrialKey
	attempt int
	at      time.Time // the event's time
	pid     int       // the llama-server that was stopped
}

var preemptLine = regexp.MustCompile(`time=(\S+) .*msg=governor kind=preempt trial=("(?:[^"\\]|\\.)*"|\S+) policy=(\S+)`)

// hangRunningTrial stops the llama-server of a trial in progress with
// SIGSTOP and returns once the governor's preempt event is in the daemon
// log. A runtime stopped just as its arm ended is replaced without any
// preemption; the next one is stopped then.
func (e *rigEnv) hangRunningTrial() preemption {
	e.t.Helper()
	logPath := filepath.Join(e.home, "daemon.log")
	seen := len(e.preemptions(logPath))
	deadline := time.Now().Add(5 * time.Minute)
	from := map[int]int{}
	for time.Now().Before(deadline) {
		pid := e.busyLlamaServer(from)
		if pid == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			continue
		}
		for wait := time.Now().Add(20 * time.Second); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
			if ps := e.preemptions(logPath); len(ps) > seen {
				p := ps[seen]
				if p.policy != "hung-runtime" {
					e.t.Fatalf("a stopped runtime was preempted by %s, want hung-runtime", p.policy)
				}
				p.pid = pid
				return p.preemption
			}
			if !alive(pid) {
				break
			}
		}
		if alive(pid) {
			log, _ := os.ReadFile(logPath)
			cwd, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
			rt, _ := os.ReadFile(filepath.Join(cwd, "llama-server.log"))
			lines := strings.Split(strings.TrimSpace(string(rt)), "\n")
			e.t.Fatalf("llama-server %d stopped for 20s with no preemption in %s:\n%s\nits log ends:\n%s\nstatus:\n%s", pid, logPath, log,
				strings.Join(lines[max(0, len(lines)-25):], "\n"), e.rigOutput("study", "status", "preempt-kill"))
		}
	}
	e.t.Fatal("no trial could be hung within 5 minutes")
	return preemption{}
}

type loggedPreemption struct {
	preemption
	policy string
}

func (e *rigEnv) preemptions(logPath string) []loggedPreemption {
	e.t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	var out []loggedPreemption
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		m := preemptLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		trial := m[2]
		if u, err := strconv.Unquote(trial); err == nil {
			trial = u
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			e.t.Fatalf("preempt event time %q: %v", m[1], err)
		}
		p := loggedPreemption{preemption: preemption{trial: trial, at: at}, policy: m[3]}
		p.key, p.attempt = parseCallID(e.t, trial)
		out = append(out, p)
	}
	return out
}

// parseCallID reads the run loop's call id, arm/job/task/repeat#attempt,
// where the task id may itself hold '/'.
func parseCallID(t *testing.T, id string) (receipts.TrialKey, int) {
	t.Helper()
	trial, att, ok := strings.Cut(id, "#")
	attempt, err := strconv.Atoi(att)
	parts := strings.Split(trial, "/")
	if !ok || err != nil || len(parts) < 4 {
		t.Fatalf("call id %q is not arm/job/task/repeat#attempt", id)
	}
	repeat, err := strconv.Atoi(parts[len(parts)-1])
	if err != nil {
		t.Fatalf("call id %q: repeat: %v", id, err)
	}
	return receipts.TrialKey{Arm: parts[0], TaskID: strings.Join(parts[2:len(parts)-1], "/"), Repeat: repeat}, attempt
}

// waitReceipt polls the daemon until the preempted call's receipt is stored.
func (e *rigEnv) waitReceipt(name string, p preemption) (receipts.Receipt, bool) {
	e.t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, r := range e.receipts(name) {
			if r.Trial() == p.key && r.Attempt == p.attempt {
				return r, true
			}
		}
	}
	return receipts.Receipt{}, false
}

func (e *rigEnv) receipts(name string) []receipts.Receipt {
	e.t.Helper()
	var out []receipts.Receipt
	sc := bufio.NewScanner(strings.NewReader(e.rig(true, "receipts", "export", name)))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r receipts.Receipt
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			e.t.Fatalf("export line is not a receipt: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func (e *rigEnv) waitDone(name string, limit time.Duration) string {
	e.t.Helper()
	var status string
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		status = e.rig(true, "study", "status", name)
		if regexp.MustCompile(`exec-1 attempt 1: (done|failed|cancelled)`).MatchString(status) {
			break
		}
	}
	return status
}

// waitEveryTrialDone waits for exec-1 of study name to end (waitDone) and
// fails the test unless it ended done with every planned trial finished;
// diagnose, when set, adds to the failure what explains it (workers' logs).
// It returns the status and the planned trial count.
func (e *rigEnv) waitEveryTrialDone(name string, limit time.Duration, diagnose func() string) (string, int) {
	e.t.Helper()
	status := e.waitDone(name, limit)
	m := regexp.MustCompile(`exec-1 attempt 1: (\w+), (\d+)/(\d+) trials`).FindStringSubmatch(status)
	if m == nil || m[1] != "done" || m[2] != m[3] {
		more := ""
		if diagnose != nil {
			more = "\n" + diagnose()
		}
		e.t.Fatalf("the execution did not finish with every trial counted:\n%s%s", status, more)
	}
	planned, _ := strconv.Atoi(m[3])
	return status, planned
}

// requireNoRuntimes waits a moment for the dead daemon's process tree to go
// (each stage dies with its parent) and fails if any of it, or the stopped
// runtime, is still running.
func (e *rigEnv) requireNoRuntimes(stopped int) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for (alive(stopped) || len(e.runtimeProcs()) > 0) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(stopped) {
		e.t.Fatalf("the SIGSTOPped llama-server %d outlived the killed daemon: %s", stopped, stateName(stopped))
	}
	if left := e.runtimeProcs(); len(left) > 0 {
		e.t.Fatalf("runtime processes outlived the killed daemon: %v", left)
	}
}

// runtimeProcs lists the live processes this test's daemon started: the
// sandbox stages (the rig binary, not as the daemon) and the runtimes,
// which work in a directory under the test's RIG_HOME.
func (e *rigEnv) runtimeProcs() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || !alive(pid) {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", en.Name(), "exe"))
		cwd, _ := os.Readlink(filepath.Join("/proc", en.Name(), "cwd"))
		cmd, _ := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		isDaemon := strings.Contains(string(cmd), "\x00daemon")
		if (exe == e.bin && !isDaemon) || strings.HasPrefix(cwd, e.home+"/") {
			out = append(out, en.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// busyLlamaServer returns the pid of this test's llama-server while it is
// processing a request, or 0. Stopped while it loads, a server would hang
// the arm's start, which no trial watches, so its log must say it is busy:
// a slot launch with no release after it. Every server of an arm appends to
// one log, so only what was written since the server was first seen (in
// from) speaks for it.
func (e *rigEnv) busyLlamaServer(from map[int]int) int {
	running := func(pid int) bool { st := procState(pid); return st == 'S' || st == 'R' }
	for pid, s := range e.newLlamaServerLogs(from, running) {
		if launch := strings.LastIndex(s, "launch_slot_"); launch >= 0 && launch > strings.LastIndex(s, "release:") {
			return pid
		}
	}
	return 0
}

// newLlamaServerLogs reads, for each of this test's llama-servers that keep
// accepts (nil: all), what its log gained since the server was first seen
// (recorded in from): every server of an arm appends to one log, so only
// that part speaks for it. A server seen for the first time is recorded,
// not returned.
func (e *rigEnv) newLlamaServerLogs(from map[int]int, keep func(pid int) bool) map[int]string {
	logs := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", en.Name(), "exe"))
		cwd, _ := os.Readlink(filepath.Join("/proc", en.Name(), "cwd"))
		if filepath.Base(exe) != "llama-server" || !strings.HasPrefix(cwd, e.home+"/") || (keep != nil && !keep(pid)) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(cwd, "llama-server.log"))
		if err != nil {
			continue
		}
		off, ok := from[pid]
		if !ok {
			from[pid] = len(b)
			continue
		}
		logs[pid] = string(b[min(off, len(b)):])
	}
	return logs
}

// rigOutput runs one CLI command for a diagnostic, whatever its exit status.
func (e *rigEnv) rigOutput(args ...string) string {
	cmd := exec.Command(e.bin, args...)
	cmd.Env = e.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s(%v)", out, err)
	}
	return string(out)
}

// procState is the process's state letter from /proc, or 0 when it is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// stateName says in words what became of a process.
func stateName(pid int) string {
	switch st := procState(pid); st {
	case 0:
		return "gone"
	case 'T', 't':
		return "still stopped"
	case 'Z':
		return "exited (a zombie)"
	default:
		return fmt.Sprintf("running again (state %c)", st)
	}
}

// alive is false for a process that is gone or a zombie (it has exited and
// only waits for its parent to collect the status).
func alive(pid int) bool {
	st := procState(pid)
	return st != 0 && st != 'Z' && st != 'X'
}
