package main

import (
	"regexp"
	"strings"
	"testing"

	"rig/internal/testenv"
	"rig/receipts"
)

// TestAiderArmsRunTheirSlotsAtOnce runs the fix-test job kind's two Aider
// arms (llama-server and Ollama) with slots 2, two tasks each: each arm's
// two trials run at once, two Aider processes each in its own sandbox
// against the arm's one runtime of two slots (their receipts' start to
// finish overlap), and every trial keeps its own graded Aider call, its
// receipt pinning slots 2, and its rows, none twice.
func TestAiderArmsRunTheirSlotsAtOnce(t *testing.T) {
	testenv.Long(t, "a study of two Aider arms on llama-server and Ollama")
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "aider-slots"
	d, kind := demoDesignFor(t, name, "fix-test", 2)
	kind["harness_caps"] = map[string]any{"turns": 1, "tokens": 64, "wall": "5m"}
	var arms []any
	for _, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		if strings.HasPrefix(am["runtime"].(string), "aider+") {
			pins := am["pins"].(map[string]any)
			pins["stop_cap"] = 64
			pins["slots"] = 2
			arms = append(arms, am)
		}
	}
	d["arms"] = arms
	keepItems(d, func(id string) bool { return id != "rig-bank-extract-json" })
	e.prepare(writeDesignMap(t, d), name)

	out := e.rig(true, "study", "run", name)
	m := regexp.MustCompile(`done: (\d+)/(\d+) trials`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[2] != "4" {
		t.Fatalf("run did not finish the 4 planned Aider trials:\n%s", out)
	}
	byArm := map[string][]receipts.Receipt{}
	counted := map[receipts.TrialKey]int{}
	for _, r := range e.exportReceipts(name) {
		if !r.Outcome.Counted() {
			t.Logf("%s/%s attempt %d: %s, %s", r.Arm, r.TaskID, r.Attempt, r.Outcome, r.Detail)
			continue
		}
		counted[r.Trial()]++
		byArm[r.Arm] = append(byArm[r.Arm], r)
		t.Logf("%s/%s: %s, %s–%s, %d output tokens; %s", r.Arm, r.TaskID, r.Outcome,
			r.StartedAt.Format("15:04:05.000"), r.FinishedAt.Format("15:04:05.000"), r.OutputTokens, r.Detail)
		if r.Harness != "aider" || r.Pins["slots"] != "2" {
			t.Errorf("%s/%s: harness %q, slots %q; want aider and 2", r.Arm, r.TaskID, r.Harness, r.Pins["slots"])
		}
		if !strings.Contains(r.Detail, "aider: exit") || r.OutputTokens == 0 || r.Grade == nil {
			t.Errorf("%s/%s: no graded Aider call of its own: outcome %s, %d output tokens, detail %q", r.Arm, r.TaskID, r.Outcome, r.OutputTokens, r.Detail)
		}
	}
	if len(counted) != 4 {
		t.Errorf("%d trials have a counted receipt, want 4", len(counted))
	}
	for k, n := range counted {
		if n != 1 {
			t.Errorf("trial %s has %d counted receipts", k, n)
		}
	}
	for arm, rs := range byArm {
		if len(rs) != 2 {
			t.Errorf("arm %s: %d counted receipts, want 2", arm, len(rs))
			continue
		}
		a, b := rs[0], rs[1]
		if !a.StartedAt.Before(b.FinishedAt) || !b.StartedAt.Before(a.FinishedAt) {
			t.Errorf("arm %s ran its two Aider trials one after the other (%s–%s, %s–%s), not on its two slots at once", arm,
				a.StartedAt.Format("15:04:05.000"), a.FinishedAt.Format("15:04:05.000"), b.StartedAt.Format("15:04:05.000"), b.FinishedAt.Format("15:04:05.000"))
		}
	}
	noRowTwice(t, e, name, 4)
	if check := e.rig(true, "study", "check", name); !strings.Contains(check, "store ok") {
		t.Fatal(check)
	}
}
