package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBudgetAndProposalCommands drives `rig budget` and `rig proposal`
// through the real daemon: the month's cap is unset, then set and read
// back; bad input is refused naming the flag and the fix and changes
// nothing; a machine with no decided study has no proposals, and an
// unknown one is refused by id.
func TestBudgetAndProposalCommands(t *testing.T) {
	e := newRigEnv(t)
	e.startDaemon()
	if out := e.rig(true, "budget", "show"); !regexp.MustCompile(`^month \d{4}-\d{2}: no monthly budget set \(an operator sets one: rig budget set\); spent so far 0s, 0\.0 Wh`).MatchString(out) {
		t.Errorf("budget show on a fresh home:\n%s", out)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--wall", "forever", "--energy-wh", "500"}, "e.g. --wall 200h"},
		{[]string{"--wall", "800h", "--energy-wh", "500"}, "up to 744h"},
		{[]string{"--wall", "200h"}, "e.g. --energy-wh 20000"},
	} {
		if out := e.rig(false, append([]string{"budget", "set", "--why", "test"}, bad.args...)...); !strings.Contains(out, bad.want) {
			t.Errorf("rig budget set %s: want an error saying %q:\n%s", strings.Join(bad.args, " "), bad.want, out)
		}
	}
	if out := e.rig(true, "budget", "show"); !strings.Contains(out, "no monthly budget set") {
		t.Errorf("a refused budget set changed the budget:\n%s", out)
	}
	set := e.rig(true, "budget", "set", "--wall", "200h", "--energy-wh", "20000", "--why", "this month's share")
	if !regexp.MustCompile(`^monthly budget 200h and 20000\.0 Wh, set by \S+`).MatchString(set) {
		t.Errorf("budget set:\n%s", set)
	}
	if out := e.rig(true, "budget", "show"); !regexp.MustCompile(`budget 200h and 20000\.0 Wh \(set by .+\); spent 0s and 0\.0 Wh; left 200h0m0s and 20000\.0 Wh`).MatchString(out) {
		t.Errorf("budget show after set:\n%s", out)
	}

	// The daemon's budget trail holds the one cap set, not the refused ones.
	trail, err := os.ReadFile(filepath.Join(e.home, "audits", "budget.jsonl"))
	if err != nil || strings.Count(string(trail), "\n") != 1 || !strings.Contains(string(trail), `"why":"this month's share"`) || !strings.Contains(string(trail), `"wall_time":"200h"`) {
		t.Errorf("audits/budget.jsonl (%v):\n%s", err, trail)
	}

	if out := e.rig(true, "proposal", "list"); !strings.Contains(out, "no proposals (a decision that switches to the challenger writes one)") {
		t.Errorf("proposal list on a fresh home:\n%s", out)
	}
	for _, args := range [][]string{{"proposal", "show", "demo-0123456789ab"}, {"proposal", "approve", "demo-0123456789ab", "--why", "test"}} {
		if out := e.rig(false, args...); !strings.Contains(out, "no such proposal") {
			t.Errorf("rig %s: want \"no such proposal\":\n%s", strings.Join(args, " "), out)
		}
	}
}
