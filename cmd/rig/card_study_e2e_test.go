package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"rig/internal/cgroup"
	"rig/receipts"
)

// cardDesign writes a card sub-study of SmolLM2 on llama-server at a 512 MiB
// reference card and a 128 MiB step-down card, which the preflight says it
// does not fit (it needs about 163 MiB at its 2048-token context).
func cardDesign(t *testing.T, name string, tasks int) string {
	t.Helper()
	d := readDesignMap(t, "../../examples/card-study/design.json")
	d["name"] = name
	d["allow_paths_outside"] = true // the study folder is temporary, the bank the repository's
	bank, _ := filepath.Abs("../../tasks/banks/extract-json.jsonl")
	jk := d["job_kinds"].([]any)[0].(map[string]any)
	jk["task_bank"], jk["sample_tasks"] = bank, tasks
	var arms []any
	for _, a := range d["arms"].([]any) {
		if a.(map[string]any)["name"] == "smollm2" {
			arms = append(arms, a)
		}
	}
	// A second arm of the same model keeps the design a comparison (an
	// incumbent and a candidate) while staying quick.
	second := map[string]any{}
	b, _ := json.Marshal(arms[0])
	json.Unmarshal(b, &second)
	second["name"], second["role"] = "smollm2-again", "candidate"
	d["arms"] = append(arms, second)
	d["card_profiles"] = []any{map[string]any{"name": "card-128mib", "memory_mib": 128, "simulated": true}}
	d["confirm_doesnt_fit"] = true
	keepItems(d, func(id string) bool { return id != "gemma-3-270m" })
	return writeDesignMap(t, d)
}

// readDesignMap reads a bundled design as a JSON tree for a test to edit.
func readDesignMap(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// writeDesignMap writes an edited design tree to a temporary design.json.
func writeDesignMap(t *testing.T, d map[string]any) string {
	t.Helper()
	out, _ := json.MarshalIndent(d, "", " ")
	path := filepath.Join(t.TempDir(), "design.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// exportReceipts reads every receipt of a study through `rig receipts export`.
func (e *rigEnv) exportReceipts(name string) []receipts.Receipt {
	e.t.Helper()
	out := e.rig(true, "receipts", "export", name)
	var recs []receipts.Receipt
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r receipts.Receipt
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			e.t.Fatalf("receipt line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// reservationsOf lists the card reservations made by one rig process.
func reservationsOf(t *testing.T, pid int) []string {
	t.Helper()
	all, err := cgroup.List()
	if err != nil {
		t.Fatalf("listing card reservations: %v", err)
	}
	var out []string
	for _, d := range all {
		if strings.HasPrefix(filepath.Base(d), "rig-"+strconv.Itoa(pid)+"-") {
			out = append(out, d)
		}
	}
	return out
}

// TestCardStudyDoesntFitIsRecordedNotRetried runs a card sub-study on the real
// llama-server and SmolLM2: the preflight verdict is stored before the first
// trial; the cell that does not fit runs once, as evidence, inside a 128 MiB
// reservation, is killed by the kernel and recorded as failed at that card,
// never retried at a smaller context; the cells that fit are scored; and no
// reservation outlives the run.
func TestCardStudyDoesntFitIsRecordedNotRetried(t *testing.T) {
	if _, err := cgroup.List(); err != nil {
		t.Skipf("no writable memory cgroup on this machine, so a simulated card cannot be enforced: %v", err)
	}
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "card-e2e"
	e.prepare(cardDesign(t, name, 3), name)
	e.rig(true, "study", "run", name)

	// The verdicts, as stored before the run.
	pre := e.rig(true, "study", "preflight", name)
	decided := map[string]time.Time{}
	for _, m := range regexp.MustCompile(`(?m)^(\S+): already decided at (\S+): (.+)$`).FindAllStringSubmatch(pre, -1) {
		at, err := time.Parse(time.RFC3339, m[2])
		if err != nil {
			t.Fatal(err)
		}
		decided[m[1]] = at
		wantFit := strings.HasSuffix(m[1], "@card-512mib")
		if (m[3] == "fits") != wantFit {
			t.Errorf("%s: preflight says %q", m[1], m[3])
		}
	}
	if len(decided) != 4 {
		t.Fatalf("want 4 stored verdicts (2 arms × 2 cards), got %d:\n%s", len(decided), pre)
	}

	recs := e.exportReceipts(name)
	perCell := map[string][]receipts.Receipt{}
	for _, r := range recs {
		perCell[r.Arm] = append(perCell[r.Arm], r)
		if at, ok := decided[r.Arm]; !ok || !at.Before(r.StartedAt) {
			t.Errorf("%s/%s started %s, but its preflight verdict is from %s", r.Arm, r.TaskID, r.StartedAt, at)
		}
		if r.Pins["context"] != "2048" {
			t.Errorf("%s/%s ran at context %s: the pinned context is 2048 and is never stepped down", r.Arm, r.TaskID, r.Pins["context"])
		}
	}
	for _, cell := range []string{"smollm2@card-128mib", "smollm2-again@card-128mib"} {
		rs := perCell[cell]
		if len(rs) != 1 {
			t.Fatalf("%s: %d receipts, want exactly the one confirmation run (never retried)", cell, len(rs))
		}
		r := rs[0]
		if r.Outcome != receipts.FailedAtCard || r.Attempt != 1 || !strings.Contains(r.Detail, "OOM") {
			t.Errorf("%s: outcome %s attempt %d detail %q, want failed_at_card on attempt 1 from the OOM killer", cell, r.Outcome, r.Attempt, r.Detail)
		}
		if r.Pins["card_memory_mib"] != "128" || r.Pins["card_simulated"] != "true" {
			t.Errorf("%s: card pins %v", cell, r.Pins)
		}
	}
	for _, cell := range []string{"smollm2@card-512mib", "smollm2-again@card-512mib"} {
		rs := perCell[cell]
		if len(rs) != 3 {
			t.Fatalf("%s: %d receipts, want 3 (one per task)", cell, len(rs))
		}
		for _, r := range rs {
			if r.Outcome != receipts.Scored || r.PeakMemoryBytes <= 0 || r.PeakMemoryBytes > 512<<20 || r.OutputPerSecond <= 0 {
				t.Errorf("%s/%s: outcome %s peak %d tok/s %.1f, want scored inside the 512 MiB card with a token rate", cell, r.TaskID, r.Outcome, r.PeakMemoryBytes, r.OutputPerSecond)
			}
		}
	}
	if left := reservationsOf(t, e.daemon.Process.Pid); len(left) > 0 {
		t.Errorf("card reservations left after the run: %v", left)
	}

	// The report carries the card table and its caveat.
	e.rig(true, "study", "report", name)
	md, err := os.ReadFile(filepath.Join(e.home, "studies", name, "reports", "exec-1", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Card sub-study", "simulated card reproduces what fits", "card-128mib (simulated)", "killed by the kernel for memory"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

// TestCardReservationRemovedAfterDaemonKill kills the daemon while a runtime
// runs inside a card reservation; the next daemon removes the reservation
// before it resumes, and the execution still finishes.
func TestCardReservationRemovedAfterDaemonKill(t *testing.T) {
	if _, err := cgroup.List(); err != nil {
		t.Skipf("no writable memory cgroup on this machine, so a simulated card cannot be enforced: %v", err)
	}
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "card-kill"
	e.prepare(cardDesign(t, name, 6), name)
	e.rig(true, "study", "run", name, "--detach")
	first := e.daemon.Process.Pid
	deadline := time.Now().Add(5 * time.Minute)
	for len(reservationsOf(t, first)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no card reservation appeared while the study ran")
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.killDaemon()
	if len(reservationsOf(t, first)) == 0 {
		t.Fatal("the killed daemon's reservation vanished by itself; the test shows nothing")
	}
	e.startDaemon()
	if left := reservationsOf(t, first); len(left) > 0 {
		t.Errorf("the restarted daemon left the killed daemon's reservations: %v", left)
	}
	deadline = time.Now().Add(15 * time.Minute)
	for !strings.Contains(e.rig(true, "study", "status", name), ": done,") {
		if time.Now().After(deadline) {
			t.Fatalf("execution did not finish after the restart:\n%s", e.rig(true, "study", "status", name))
		}
		time.Sleep(2 * time.Second)
	}
	if left := reservationsOf(t, e.daemon.Process.Pid); len(left) > 0 {
		t.Errorf("card reservations left after the run: %v", left)
	}
}
