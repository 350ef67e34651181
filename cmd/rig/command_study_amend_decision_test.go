package main

import (
	"strings"
	"testing"
)

// amend-decision needs its rationale; without a terminal it refuses unless
// --yes, sending nothing; with --yes it appends at once and prints what was
// appended.
func TestStudyAmendDecisionNeedsYes(t *testing.T) {
	fd := newFakeDaemon(t)
	if _, err := rigWithInput(t, "", "study", "amend-decision", "s1", "--socket", fd.socket, "--yes"); err == nil || !strings.Contains(err.Error(), "--rationale") {
		t.Errorf("amend-decision with no rationale = %v, want an error naming --rationale", err)
	}
	args := []string{"study", "amend-decision", "s1", "--rationale", "typo: gemma is faster", "--socket", fd.socket}
	if out, err := rigWithInput(t, "yes\n", args...); err == nil || !strings.Contains(err.Error(), "add --yes") {
		t.Errorf("amend-decision with stdin a pipe = %v (printed %q); want a refusal naming --yes", err, out)
	}
	if calls := fd.sent(); len(calls) != 0 {
		t.Errorf("the refused amendments sent %v to the daemon", calls)
	}
	out, err := rigWithInput(t, "", append(args, "--yes")...)
	if err != nil {
		t.Fatal(err)
	}
	if calls := fd.sent(); strings.Join(calls, " ") != "amend-decision" {
		t.Errorf("amend-decision --yes sent %v; want one amend-decision, no preview", calls)
	}
	for _, want := range []string{"amended:", "amendment      1 of the decision on exec-1 recorded at 2026-12-06T09:00:00Z", "rationale      typo: gemma is faster", "actor          dana (uid 1001)", "at             2026-12-06T10:00:00Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("amend-decision --yes printed no %q:\n%s", want, out)
		}
	}
}
