package main

import (
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/internal/testenv"
	"rig/receipts"
)

// TestScaleOutWorkerServesItsArmsSlots runs a two-arm study whose arms pin
// slots 2 on one rig worker through the real Temporal dev server and the
// real llama-server: the worker starts the runtime with 2 slots, says so in
// its log, and runs two of the arm's trials at once (their receipts'
// start-to-finish overlap); the coordinator keeps in flight the 2 slots the
// worker advertises, not the 16 of its default --in-flight (the chunk's
// history); every trial has one counted receipt, from that worker, pinned
// slots 2, and no generation row is there twice.
func TestScaleOutWorkerServesItsArmsSlots(t *testing.T) {
	testenv.Long(t, "a scale-out study on the Temporal dev server and llama-server")
	e := newRigEnv(t)
	_, _, addr, spool := e.startDevServer()
	e.ensureGovernorPass()
	e.startDaemon("--temporal", addr, "--spool", spool)
	name := "slots"
	d, _ := demoDesignFor(t, name, "extract-json", 4)
	var arms []any
	for _, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		if am["runtime"].(string) == "llama-server" {
			pins := am["pins"].(map[string]any)
			pins["stop_cap"] = 96
			pins["slots"] = 2
			arms = append(arms, am)
		}
	}
	d["arms"] = arms
	keepItems(d, func(id string) bool { return id != "aider-chat" && id != "rig-bank-fix-test" && id != "ollama" })
	e.prepare(writeDesignMap(t, d), name)

	w := e.startWorker(addr, spool, "ws")
	if out := e.rig(true, "study", "run", name, "--engine", "temporal", "--detach"); !strings.Contains(out, "execution exec-1 started") {
		t.Fatalf("submit: %s", out)
	}
	status, planned := e.waitEveryTrialDone(name, 15*time.Minute, func() string { return "worker: " + w.logText() })
	w.waitLog(t, regexp.MustCompile(`msg="serves its arm's slots" worker=ws arm=\S+ slots=2`), 1, time.Second)

	counted := map[receipts.TrialKey]int{}
	var mine []receipts.Receipt
	for _, r := range e.receipts(name) {
		if !r.Outcome.Counted() {
			continue
		}
		counted[r.Trial()]++
		mine = append(mine, r)
		// runtime_slots is what the started llama-server said it serves.
		if r.Pins["worker"] != "ws" || r.Pins["slots"] != "2" || r.Pins["runtime_slots"] != "2" {
			t.Errorf("receipt %s: worker %q, slots %q, runtime_slots %q; want ws, 2 and 2", r.Trial(), r.Pins["worker"], r.Pins["slots"], r.Pins["runtime_slots"])
		}
	}
	if len(counted) != planned {
		t.Errorf("%d trials have a counted receipt, %d were planned", len(counted), planned)
	}
	for k, n := range counted {
		if n != 1 {
			t.Errorf("trial %s has %d counted receipts", k, n)
		}
	}
	// Two in flight at once on the worker's runtime: receipts of one arm
	// whose start-to-finish intervals overlap.
	overlaps := 0
	for i, a := range mine {
		for _, b := range mine[i+1:] {
			if a.Arm == b.Arm && a.StartedAt.Before(b.FinishedAt) && b.StartedAt.Before(a.FinishedAt) {
				overlaps++
			}
		}
	}
	if overlaps == 0 {
		t.Errorf("no two receipts of an arm overlap: the worker ran one trial at a time\n%s", w.logText())
	}
	// The coordinator kept in flight the slots the worker advertised (2),
	// not its whole --in-flight limit (16): so the engine's record says.
	most := mostTrialsInFlight(t, addr, spool, name)
	if len(most) != 1 {
		t.Errorf("trials went to queues %v, want the one llama-server queue", most)
	}
	for q, n := range most {
		if n != 2 {
			t.Errorf("queue %s: at most %d trials in flight at once, want the worker's advertised 2\n%s", q, n, w.logText())
		}
	}
	noRowTwice(t, e, name, planned)
	if check := e.rig(true, "study", "check", name); !strings.Contains(check, "store ok") {
		t.Fatal(check)
	}
	t.Logf("%d trials, %d overlapping pairs of receipts on one runtime, most in flight per queue %v; status:\n%s", planned, overlaps, most, status)
}

// noRowTwice checks that exec-1 of study name has no generation row twice,
// and at least one row per planned trial.
func noRowTwice(t *testing.T, e *rigEnv, name string, planned int) {
	t.Helper()
	st, err := layout.Home(e.home).Study(name)
	if err != nil {
		t.Fatal(err)
	}
	x, err := st.Execution("exec-1")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(x.Generations())
	rows, seen := 0, map[string]bool{}
	for _, f := range files {
		rd, err := genrecord.OpenReader(f)
		if err != nil {
			t.Fatal(err)
		}
		for {
			row, err := rd.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Errorf("%s: %v", f, err)
				}
				break
			}
			rows++
			if seen[row.RowID] {
				t.Errorf("%s: row %s twice", f, row.RowID)
			}
			seen[row.RowID] = true
		}
		rd.Close()
	}
	if rows < planned {
		t.Errorf("%d generation rows for %d planned trials", rows, planned)
	}
}
