package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// aiderDesign writes a study of the fix-test job kind only: the incumbent
// SmolLM2 (Q4_1) driven by Aider on llama-server and the candidate, its Q8_0
// requantization, driven by Aider on Ollama, one task each, one model call per trial at a short stop cap
// so the test stays within minutes on two cores.
func aiderDesign(t *testing.T, name string) string {
	t.Helper()
	return aiderDesignWithWall(t, name, "5m")
}

// aiderDesignWithWall is aiderDesign with its wall cap ("auto" to derive it
// from the validation runs' speed).
func aiderDesignWithWall(t *testing.T, name, wall string) string {
	t.Helper()
	d, kind := demoDesignFor(t, name, "fix-test", 1)
	kind["harness_caps"] = map[string]any{"turns": 1, "tokens": 64, "wall": wall}
	var arms []any
	for _, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		if strings.HasPrefix(am["runtime"].(string), "aider+") {
			am["pins"].(map[string]any)["stop_cap"] = 64 // equal across the job kind's arms
			arms = append(arms, am)
		}
	}
	if len(arms) != 2 {
		t.Fatalf("the demo design has %d Aider arms, want the incumbent and the candidate", len(arms))
	}
	d["arms"] = arms
	keepItems(d, func(id string) bool { return id != "rig-bank-extract-json" })
	return writeDesignMap(t, d)
}

// TestAiderStudyTrialsOnRealRuntimes runs counted trials of a study through
// the real Aider on both runtimes: each trial keeps its model call in the
// arm's generation record, its receipt names Aider and the caps it ran under,
// and the kept calls replay exactly through the pinned model.
func TestAiderStudyTrialsOnRealRuntimes(t *testing.T) {
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "e2e-aider"
	e.prepare(aiderDesign(t, name), name)
	out := e.rig(true, "study", "run", name)
	m := regexp.MustCompile(`done: (\d+)/(\d+) trials`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[2] != "2" {
		t.Fatalf("run did not finish the 2 planned Aider trials:\n%s", out)
	}
	recs := e.exportReceipts(name)
	if len(recs) != 2 {
		t.Fatalf("exported %d receipts, want 2", len(recs))
	}
	for _, r := range recs {
		t.Logf("%s on %s: %s, %d output tokens; %s", r.Arm, r.Runtime, r.Outcome, r.OutputTokens, r.Detail)
		if r.Harness != "aider" || r.HarnessVersion == "" {
			t.Errorf("%s: harness %q version %q, want Aider and its version", r.Arm, r.Harness, r.HarnessVersion)
		}
		if got := r.Pins["harness_caps"]; got != "turns 1, output tokens 64, wall 5m0s" {
			t.Errorf("%s: receipt pins harness_caps %q, want the design's caps", r.Arm, got)
		}
		if !strings.Contains(r.Detail, "aider: exit") || r.OutputTokens == 0 || r.Grade == nil {
			t.Errorf("%s: the trial kept no graded Aider call: outcome %s, %d output tokens, detail %q", r.Arm, r.Outcome, r.OutputTokens, r.Detail)
		}
	}
	for _, arm := range []string{"smollm2-aider-llama-server", "smollm2-q8-aider-ollama"} {
		rec := filepath.Join(e.home, "studies", name, "executions", "exec-1", "generations-"+arm+".jsonl")
		got := e.rig(true, "replay", rec)
		t.Logf("rig replay %s:\n%s", filepath.Base(rec), got)
		if !strings.Contains(got, "aider") || !strings.Contains(got, "summary: reproduced") {
			t.Errorf("the kept Aider calls of %s did not all reproduce:\n%s", arm, got)
		}
	}
}

// TestAutoWallsAreTheSameOnWorkersAsLocally runs a design whose wall cap is
// "auto" on this machine (exec-1) and then through the engine on two
// workers (exec-2): every receipt of both holds its trial to the same
// derived wall, and the engine's run ends with a counted receipt per trial.
// Before the one runner, a worker was given no derived wall, so it refused
// every trial of such a design and each ended as an error receipt.
func TestAutoWallsAreTheSameOnWorkersAsLocally(t *testing.T) {
	e := newRigEnv(t)
	_, _, addr, spool := e.startDevServer()
	e.ensureGovernorPass()
	e.startDaemon("--temporal", addr, "--spool", spool)
	name := "auto-wall"
	e.prepare(aiderDesignWithWall(t, name, "auto"), name)

	local := e.rig(true, "study", "run", name)
	if m := regexp.MustCompile(`done: (\d+)/(\d+) trials`).FindStringSubmatch(local); m == nil || m[1] != m[2] || m[2] != "2" {
		t.Fatalf("the local run did not finish its 2 trials:\n%s", local)
	}
	e.startWorker(addr, spool, "w1")
	e.startWorker(addr, spool, "w2")
	engine := e.rig(true, "study", "rerun", name, "exec-1", "--engine", "temporal")
	if m := regexp.MustCompile(`done: (\d+)/(\d+) trials`).FindStringSubmatch(engine); m == nil || m[1] != m[2] || m[2] != "2" {
		t.Fatalf("the engine's run did not finish its 2 trials:\n%s", engine)
	}

	walls := map[string]map[string]bool{} // execution → the harness_caps its counted receipts name
	counted := map[string]int{}           // execution and trial → its counted receipts
	for _, r := range e.exportReceipts(name) {
		if !r.Outcome.Counted() {
			// A preempted attempt is rerun; the next one must count.
			t.Logf("%s %s/%s attempt %d: %s, %s", r.ExecutionID, r.Arm, r.TaskID, r.Attempt, r.Outcome, r.Detail)
			continue
		}
		counted[r.ExecutionID+" "+r.Trial().String()]++
		if r.ExecutionID == "exec-2" && r.Pins["worker"] != "w1" && r.Pins["worker"] != "w2" {
			t.Errorf("exec-2 %s/%s: run by %q, want a worker", r.Arm, r.TaskID, r.Pins["worker"])
		}
		if walls[r.ExecutionID] == nil {
			walls[r.ExecutionID] = map[string]bool{}
		}
		walls[r.ExecutionID][r.Pins["harness_caps"]] = true
	}
	t.Logf("wall caps on the receipts: %v", walls)
	if len(counted) != 4 {
		t.Errorf("counted receipts per trial: %v; want the 2 trials of each execution", counted)
	}
	for k, n := range counted {
		if n != 1 {
			t.Errorf("%s has %d counted receipts, want 1", k, n)
		}
	}
	if len(walls["exec-1"]) != 1 || len(walls["exec-2"]) != 1 {
		t.Fatalf("want one wall cap per execution, got %v", walls)
	}
	for caps := range walls["exec-1"] {
		if !strings.Contains(caps, "(auto: ") {
			t.Errorf("exec-1's receipts name %q, want a derived (auto) wall", caps)
		}
		if !walls["exec-2"][caps] {
			t.Errorf("the workers' receipts name %v, the local run's %q: want the same wall", walls["exec-2"], caps)
		}
	}
}
