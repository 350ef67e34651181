package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"rig/fidelity"
	"rig/internal/testenv"
	"rig/receipts"
	"rig/report"
)

// TestScaleOutWorkerServesItsArmsSlots runs a two-arm study whose arms pin
// slots 2 on one rig worker through the real Temporal dev server and the
// real llama-server: the worker starts the runtime with 2 slots, says so in
// its log, and runs two of the arm's trials at once (their receipts'
// start-to-finish overlap); the coordinator keeps in flight the 2 slots the
// worker advertises, not the 16 of its default --in-flight (the chunk's
// history); every trial has one counted receipt, from that worker, pinned
// slots 2, and no generation row is there twice. The job kind names the
// Q8_0 arm its reference, so the execution ends with the fidelity step on
// the daemon's host, on the rows merged from the worker: fidelity.jsonl
// holds both arms on the same tasks, each scored as its model, and the
// report has its "Fidelity to" section.
func TestScaleOutWorkerServesItsArmsSlots(t *testing.T) {
	testenv.Long(t, "a scale-out study on the Temporal dev server and llama-server")
	e := newRigEnv(t)
	_, _, addr, spool := e.startDevServer()
	e.ensureGovernorPass()
	e.startDaemon("--temporal", addr, "--spool", spool)
	name := "slots"
	d, kind := demoDesignFor(t, name, "extract-json", 4)
	const reference = "smollm2-q8-llama-server"
	kind["reference"] = reference
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
	checkEngineFidelity(t, e, name, reference)
	t.Logf("%d trials, %d overlapping pairs of receipts on one runtime, most in flight per queue %v; status:\n%s", planned, overlaps, most, status)
}

// noRowTwice checks that exec-1 of study name has no generation row twice,
// and at least one row per planned trial.
func noRowTwice(t *testing.T, e *rigEnv, name string, planned int) {
	t.Helper()
	rows := 0
	for _, n := range e.rowIDs(name) {
		rows += n
	}
	if rows < planned {
		t.Errorf("%d generation rows for %d planned trials", rows, planned)
	}
}

// checkEngineFidelity: an engine execution of a design with a reference
// arm ends with the fidelity step on the daemon's host: exec-1's
// fidelity.jsonl holds every arm on the same tasks, each scored as its
// model (its trials ran on a worker, not beside the scorer), the daemon's
// log says so, and the report reads the records into its section.
func checkEngineFidelity(t *testing.T, e *rigEnv, name, reference string) {
	t.Helper()
	x := e.firstExecution(name)
	recs, err := fidelity.ReadStudy(x.Records().Fidelity())
	if err != nil || len(recs) == 0 {
		t.Fatalf("the engine execution kept no fidelity records at %s (%v)", x.Records().Fidelity(), err)
	}
	tasks := map[string][]string{}
	for _, r := range recs {
		tasks[r.Arm] = append(tasks[r.Arm], r.Task)
		if r.Reference != reference || r.ScoredBy != fidelity.ScoredByModel || len(r.Tokens) == 0 {
			t.Errorf("record of %s on %s: reference %q, scored_by %q, %d tokens; want %s, model, some tokens", r.Arm, r.Task, r.Reference, r.ScoredBy, len(r.Tokens), reference)
		}
	}
	if len(tasks) != 2 || !slices.Equal(slices.Sorted(slices.Values(tasks[reference])), slices.Sorted(slices.Values(tasks["smollm2-llama-server"]))) {
		t.Errorf("fidelity records by arm %v; want both arms on the same tasks", tasks)
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "daemon.log"))
	if !strings.Contains(string(log), "fidelity step of an engine execution") || !strings.Contains(string(log), `msg="fidelity scored"`) {
		t.Errorf("the daemon's log does not say the fidelity step ran:\n%s", log)
	}
	rep := e.rig(true, "study", "report", name)
	html := regexp.MustCompile(`report: (\S+\.html)`).FindStringSubmatch(rep)
	if html == nil {
		t.Fatalf("report path not printed:\n%s", rep)
	}
	raw, err := os.ReadFile(strings.TrimSuffix(html[1], ".html") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var data report.Data
	if err := json.Unmarshal(raw, &data); err != nil || len(data.Kinds) != 1 {
		t.Fatalf("report.json: %v", err)
	}
	// The section lists the arms held to the reference (not the reference
	// itself) and their pair with it.
	f := data.Kinds[0].Fidelity
	if f == nil || f.Reference != reference || len(f.Arms) != 1 || f.Arms[0].Arm != "smollm2-llama-server" || len(f.Pairs) != 1 {
		t.Fatalf("the report's fidelity section is %+v; want the Q4_1 arm held to %s, and their pair", f, reference)
	}
	for _, a := range f.Arms {
		if a.Tasks != len(tasks[a.Arm]) || a.Tokens == 0 || a.ScoredBy != fidelity.ScoredByModel {
			t.Errorf("the report's fidelity of %s: %d tasks, %d tokens, scored by %q; want %d tasks, some tokens, model", a.Arm, a.Tasks, a.Tokens, a.ScoredBy, len(tasks[a.Arm]))
		}
	}
	md, err := os.ReadFile(strings.TrimSuffix(html[1], ".html") + ".md")
	if err != nil || !strings.Contains(string(md), "Fidelity to "+reference) {
		t.Errorf("report.md has no \"Fidelity to %s\" section (%v)", reference, err)
	}
}
