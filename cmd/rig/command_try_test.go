package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rig/internal/testenv"
)

// tryStudyFolder writes, in one folder of its own, the quick study's design
// with its bank beside it (so that the test may edit the bank), four tasks
// planned and a short stop cap: a rule whose "underpowered" clause is certain
// to hold with four tasks, the newcomer's case.
func tryStudyFolder(t *testing.T, e *rigEnv, name string) (dir, design string) {
	t.Helper()
	dir = t.TempDir()
	bank, err := os.ReadFile("../../tasks/banks/extract-json.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bank.jsonl"), bank, 0o600); err != nil {
		t.Fatal(err)
	}
	d := readDesignMap(t, "../../examples/quick-study/design.json")
	d["name"] = name
	jk := d["job_kinds"].([]any)[0].(map[string]any)
	jk["task_bank"], jk["sample_tasks"] = "bank.jsonl", 4
	d["power"].(map[string]any)["task_count"] = 4
	for _, a := range d["arms"].([]any) {
		a.(map[string]any)["pins"].(map[string]any)["stop_cap"] = 32
	}
	raw, _ := json.MarshalIndent(d, "", " ")
	design = filepath.Join(dir, "design.json")
	if err := os.WriteFile(design, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	e.rig(true, "tasks", "audit", filepath.Join(dir, "bank.jsonl"))
	return dir, design
}

var tryPID = regexp.MustCompile(`(?m)^  (\S+) +llama-server +pid (\d+) +(.*)$`)

// TestTryPromoteRunReport goes from a draft to a report as issue 47 asks:
// rig try prints both arms' answers side by side with the pilot figures and
// the rule's fate; a second try after an edit of the stop cap reuses the
// warm runtimes (the same pids); a bank changed after the try makes
// register --from-try answer stale_asset naming the bank and both digests;
// register --from-try of what was tried, review and approve all warn that
// the rule can only say "no decision"; and after approval rig study run
// performs the freeze, preflight, validation and dry run (which warns too)
// and the counted run, with no other command, and the report follows.
func TestTryPromoteRunReport(t *testing.T) {
	testenv.Long(t, "tries, registers and runs a study on real llama-servers")
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "try-promote"
	dir, design := tryStudyFolder(t, e, name)
	const fate = "with 4 tasks this rule can only say no decision at this sample size"

	first := e.rig(true, "try", design, "--tasks", "2")
	t.Logf("rig try printed:\n%s", first)
	for _, want := range []string{"== extract-json/", "prompt  ", "smollm2-llama-server ", "smollm2-q8-llama-server ", "tok ", "pilot", "discordance", fate, "--from-try try-"} {
		if !strings.Contains(first, want) {
			t.Errorf("rig try printed no %q", want)
		}
	}
	started := tryPID.FindAllStringSubmatch(first, -1)
	if len(started) != 2 || !strings.Contains(started[0][3], "started in") {
		t.Fatalf("rig try does not show each arm's runtime started: %q", started)
	}

	// An edit of a request pin (the stop cap) keeps the runtimes warm.
	d := readDesignMap(t, design)
	for _, a := range d["arms"].([]any) {
		a.(map[string]any)["pins"].(map[string]any)["stop_cap"] = 24
	}
	raw, _ := json.MarshalIndent(d, "", " ")
	edited := filepath.Join(dir, "design-cap24.json")
	if err := os.WriteFile(edited, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	second := e.rig(true, "try", edited, "--tasks", "2")
	again := tryPID.FindAllStringSubmatch(second, -1)
	if len(again) != 2 {
		t.Fatalf("the second try shows no runtimes:\n%s", second)
	}
	for i := range again {
		if again[i][2] != started[i][2] || !strings.Contains(again[i][3], "warm, kept from an earlier try") {
			t.Errorf("arm %s: second try ran on pid %s (%s); the first on %s: want the same runtime, warm", again[i][1], again[i][2], again[i][3], started[i][2])
		}
	}
	id := regexp.MustCompile(`--from-try (try-[0-9a-f]{12})`).FindStringSubmatch(first)[1]
	if list := e.rig(true, "try", "list"); !strings.Contains(list, id) || len(regexp.MustCompile(`(?m)^try-[0-9a-f]{12} `).FindAllString(list, -1)) != 2 {
		t.Errorf("rig try list does not show both tries:\n%s", list)
	}

	// The bank changes between the try and the promotion: stale_asset.
	bankPath := filepath.Join(dir, "bank.jsonl")
	orig, _ := os.ReadFile(bankPath)
	if err := os.WriteFile(bankPath, []byte(strings.Replace(string(orig), "555-0142", "555-0143", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	stale := e.rig(false, "study", "register", design, "--from-try", id)
	if !regexp.MustCompile(`stale asset: bank:extract-json \(task bank [^)]*bank\.jsonl\): sha256: was [0-9a-f]{64} in try ` + id + ` and is [0-9a-f]{64} now`).MatchString(stale) {
		t.Errorf("register --from-try after a bank edit is not stale_asset naming the bank and both digests:\n%s", stale)
	}
	if err := os.WriteFile(bankPath, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.rig(false, "study", "register", edited, "--from-try", id); !strings.Contains(out, "stale asset: design") {
		t.Errorf("register --from-try of another design than was tried is not stale:\n%s", out)
	}

	// What was tried is registered; the rule's fate is told at register,
	// at review and at the dry run.
	if out := e.rig(true, "study", "register", design, "--from-try", id); !strings.Contains(out, "warning    "+fate) {
		t.Errorf("register does not warn that the rule can only say no decision:\n%s", out)
	}
	if out := e.rig(true, "study", "review", name, "--verdict", "pass", "--licence-line", "licences: smollm2-135m-instruct (Apache-2.0) and the rest checked; all items allowed for evaluation and inference"); !strings.Contains(out, "warning    "+fate) {
		t.Errorf("review does not show the reviewer the rule's fate:\n%s", out)
	}
	e.rig(true, "study", "approve", name)
	run := e.rig(true, "study", "run", name)
	t.Logf("rig study run printed:\n%s", run)
	for _, want := range []string{"== freeze\nfrozen: snapshot sha256:", "== preflight\n", "verdict: fits", "== validation\n", "pass=true", "== dry run\n", "warning: " + fate, "== counted run\n", "done: 8/8 trials"} {
		if !strings.Contains(run, want) {
			t.Errorf("rig study run printed no %q", want)
		}
	}
	if !regexp.MustCompile(`== freeze\nfrozen: snapshot sha256:[0-9a-f]+\nwarning    ` + fate).MatchString(run) {
		t.Errorf("the freeze rig study run made does not warn of the rule's fate")
	}
	if st := e.rig(true, "study", "status", name); !strings.Contains(st, "freeze") || !strings.Contains(st, "validation") {
		t.Errorf("the gates rig study run performed are not recorded as when run alone:\n%s", st)
	}
	report := e.rig(true, "study", "report", name)
	if !strings.Contains(report, "no decision at this sample size") || !strings.Contains(report, "report.html") {
		t.Errorf("the report does not reach the decision the fate foretold:\n%s", report)
	}
	var reg struct {
		FromTry struct {
			ID string `json:"id"`
		} `json:"from_try"`
	}
	raw, err := os.ReadFile(filepath.Join(e.home, "studies", name, "registration.json"))
	if err != nil || json.Unmarshal(raw, &reg) != nil || reg.FromTry.ID != id {
		t.Errorf("the registration does not record the try it came from (%v): %s", err, raw)
	}
	if out := e.rig(true, "try", "prune", "--all"); !strings.Contains(out, "removed 2 tries") {
		t.Errorf("rig try prune --all:\n%s", out)
	}
}
