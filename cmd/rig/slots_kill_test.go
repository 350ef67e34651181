package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/internal/testenv"
	"rig/receipts"
	"rig/studies"
)

// TestDaemonKilledWithTrialsInFlight runs a study whose llama-server arms
// hold 2 and then 4 slots, and kills the daemon with SIGKILL twice while
// trials are in flight: once when every slot of a runtime is busy, once
// just as one trial of a round has its answer while others are still
// being served (the moment its rows and receipt are being kept). After each
// restart the execution resumes. At the end every planned trial has exactly
// one counted receipt, recorded at the arm's slots; no generation row is in
// the records twice, every counted trial's call has its row; and no runtime
// outlived a killed daemon.
func TestDaemonKilledWithTrialsInFlight(t *testing.T) {
	testenv.Long(t, "end-to-end: kills the daemon twice with trials in flight on the real llama-server")
	for _, slots := range []int{2, 4} {
		t.Run(fmt.Sprintf("slots-%d", slots), func(t *testing.T) { killWithTrialsInFlight(t, slots) })
	}
}

func killWithTrialsInFlight(t *testing.T, slots int) {
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := fmt.Sprintf("slots-kill-%d", slots)
	d := readDesignMap(t, smallDesign(t, name, 2*slots, false))
	for _, a := range d["arms"].([]any) {
		a.(map[string]any)["pins"].(map[string]any)["slots"] = slots
	}
	e.prepare(writeDesignMap(t, d), name)
	e.rig(true, "study", "run", name, "--detach")

	logs := map[int]int{}
	if pid := e.waitSlotsBusy(logs, slots, false); pid == 0 {
		t.Fatalf("no llama-server of this study had %d slots busy at once within 5 minutes", slots)
	}
	t.Logf("killing the daemon with %d trials in flight", slots)
	e.killDaemon()
	e.requireNoRuntimes(0)
	e.startDaemon()

	if pid := e.waitSlotsBusy(logs, 2, true); pid == 0 {
		t.Fatal("no trial of a round ended beside another in flight within 5 minutes")
	}
	time.Sleep(time.Duration(time.Now().UnixNano()%30) * time.Millisecond) // somewhere in its rows and receipt
	t.Log("killing the daemon as a trial of a round ended beside others in flight")
	e.killDaemon()
	e.requireNoRuntimes(0)
	e.startDaemon()

	_, planned := e.waitEveryTrialDone(name, 20*time.Minute, nil)
	check := e.rig(true, "study", "check", name)
	if c := regexp.MustCompile(`store ok: .*\((\d+) counted\)`).FindStringSubmatch(check); c == nil || c[1] != strconv.Itoa(planned) {
		t.Fatalf("counted receipts != %d planned trials:\n%s", planned, check)
	}
	counted := map[receipts.TrialKey]receipts.Receipt{}
	lost, preempted := 0, 0
	for _, r := range e.receipts(name) {
		switch {
		case r.Outcome.Counted():
			if prev, twice := counted[r.Trial()]; twice {
				t.Errorf("trial %s has two counted receipts: attempts %d and %d", r.Trial(), prev.Attempt, r.Attempt)
			}
			counted[r.Trial()] = r
			if r.Pins["slots"] != strconv.Itoa(slots) {
				t.Errorf("trial %s: receipt pins slots %q, want %d", r.Trial(), r.Pins["slots"], slots)
			}
		case strings.HasPrefix(r.Detail, "lost:"):
			lost++
		case r.Outcome == receipts.Preempted:
			preempted++
		}
	}
	if len(counted) != planned {
		t.Errorf("%d trials have a counted receipt, planned %d", len(counted), planned)
	}
	rows := e.rowIDs(name)
	for k, r := range counted {
		if r.GenerationSHA256 == genrecord.EmptySum {
			continue
		}
		call := studies.TrialKey{Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat}.CallID(r.Attempt)
		if rows[call] != 1 {
			t.Errorf("trial %s: its counted call %s has %d rows, want 1", k, call, rows[call])
		}
	}
	t.Logf("%d trials counted once each; %d rows; %d attempts lost between rows and receipt, %d preempted", len(counted), len(rows), lost, preempted)

	e.stopDaemon()
	if left := e.runtimeProcs(); len(left) > 0 {
		t.Errorf("runtime processes left after the daemon stopped: %v", left)
	}
}

// firstExecution is the folder of the study's first execution (exec-1).
func (e *rigEnv) firstExecution(name string) layout.Execution {
	e.t.Helper()
	st, err := layout.Home(e.home).Study(name)
	if err != nil {
		e.t.Fatal(err)
	}
	x, err := st.Execution("exec-1")
	if err != nil {
		e.t.Fatal(err)
	}
	return x
}

// rowIDs counts the rows of the study's first execution by row id, and
// fails the test on a row id met twice or a record that does not read.
func (e *rigEnv) rowIDs(name string) map[string]int {
	e.t.Helper()
	x := e.firstExecution(name)
	files, _ := filepath.Glob(x.Generations())
	seen := map[string]int{}
	for _, f := range files {
		rd, err := genrecord.OpenReader(f)
		if err != nil {
			e.t.Fatal(err)
		}
		for {
			row, err := rd.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					e.t.Errorf("%s: %v", f, err)
				}
				break
			}
			seen[row.RowID]++
			if seen[row.RowID] > 1 {
				e.t.Errorf("%s: row %s twice", f, row.RowID)
			}
		}
		rd.Close()
	}
	return seen
}

var slotLine = regexp.MustCompile(`(launch_slot_|release): id +(\d+) \|`)

// waitSlotsBusy watches this test's llama-servers' logs (only what each
// wrote since first seen, in from) and returns the pid of one with at
// least n slots busy at once; with ending, of one where a slot was just
// released while n−1 others stayed busy. 0 after five minutes.
func (e *rigEnv) waitSlotsBusy(from map[int]int, n int, ending bool) int {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for pid, log := range e.newLlamaServerLogs(from, nil) {
			busy := map[string]bool{}
			for _, m := range slotLine.FindAllStringSubmatch(log, -1) {
				if m[1] == "release" {
					if ending && len(busy) >= n {
						return pid
					}
					delete(busy, m[2])
				} else {
					busy[m[2]] = true
				}
			}
			if !ending && len(busy) >= n {
				return pid
			}
		}
	}
	return 0
}

// TestGovernorFaultPreemptsEveryTrialInFlight stops the llama-server of an
// arm with pins.slots 2 (SIGSTOP) while both its slots are busy: the
// daemon's governor preempts every trial in flight on it, each preempted
// call gets its receipt, and each trial is rerun as its own next attempt
// until every planned trial has exactly one counted receipt.
func TestGovernorFaultPreemptsEveryTrialInFlight(t *testing.T) {
	testenv.Long(t, "end-to-end: a governor fault with two trials in flight on the real llama-server")
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "slots-fault"
	d := readDesignMap(t, smallDesign(t, name, 4, false))
	for _, a := range d["arms"].([]any) {
		a.(map[string]any)["pins"].(map[string]any)["slots"] = 2
	}
	e.prepare(writeDesignMap(t, d), name)
	e.rig(true, "study", "run", name, "--detach")

	logPath := filepath.Join(e.home, "daemon.log")
	seen := len(e.preemptions(logPath))
	pid := e.waitSlotsBusy(map[int]int{}, 2, false)
	if pid == 0 {
		t.Fatal("no llama-server of this study had both slots busy within 5 minutes")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var fault []loggedPreemption
	for wait := time.Now().Add(30 * time.Second); time.Now().Before(wait) && len(fault) < 2; time.Sleep(20 * time.Millisecond) {
		fault = e.preemptions(logPath)[seen:]
	}
	if len(fault) < 2 {
		t.Fatalf("llama-server %d stopped with two trials in flight: %d preempt events within 30 s, want one per trial in flight: %+v", pid, len(fault), fault)
	}
	t.Logf("stopped llama-server %d: preempted %s (%s) and %s", pid, fault[0].trial, fault[0].policy, fault[1].trial)

	e.waitEveryTrialDone(name, 20*time.Minute, nil)
	byTrial := map[receipts.TrialKey][]receipts.Receipt{}
	for _, r := range e.receipts(name) {
		byTrial[r.Trial()] = append(byTrial[r.Trial()], r)
	}
	for k, rs := range byTrial {
		n := 0
		for _, r := range rs {
			if r.Outcome.Counted() {
				n++
			}
		}
		if n != 1 {
			t.Errorf("trial %s has %d counted receipts, want 1: %+v", k, n, rs)
		}
	}
	for _, p := range fault[:2] {
		var preempted, rerun bool
		for _, r := range byTrial[p.key] {
			preempted = preempted || (r.Attempt == p.attempt && r.Outcome == receipts.Preempted)
			rerun = rerun || (r.Outcome.Counted() && r.Attempt > p.attempt && r.ParentAttempt >= p.attempt)
		}
		if !preempted || !rerun {
			t.Errorf("%s: preempted receipt %v, counted rerun after it %v; want both: %+v", p.trial, preempted, rerun, byTrial[p.key])
		}
	}
	e.stopDaemon()
	if left := e.runtimeProcs(); len(left) > 0 {
		t.Errorf("runtime processes left after the daemon stopped: %v", left)
	}
}
