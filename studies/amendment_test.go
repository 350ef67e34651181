package studies

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// An amendment applies only to a decided study, with a rationale and the
// decided execution; it leaves the state and outcome as they are, numbers
// itself after the ones before, names when the decision was recorded, and
// is audited. A refused one changes nothing.
func TestAmendmentAppendsToADecision(t *testing.T) {
	l := NewLifecycle("h1", "ana", at(0))
	for _, ev := range []Event{
		{Kind: EventReview, Actor: "ana", At: at(1), Review: pass("h1")},
		{Kind: EventApprove, Actor: "Director Lee", At: at(2)},
		{Kind: EventFreeze, Actor: "ana", At: at(3), SnapshotHash: "s1"},
		{Kind: EventRun, Actor: "ana", At: at(4), Execution: "demo-a1"},
		{Kind: EventFinish, Actor: "daemon", At: at(5), Execution: "demo-a1"},
	} {
		if _, err := l.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	amend := func(why string, min int) Event {
		return Event{Kind: EventAmend, Actor: "Director Lee", At: at(min), Execution: "demo-a1", Why: why}
	}
	if _, err := l.Apply(amend("too early", 6)); !errors.Is(err, ErrTransition) || !strings.Contains(err.Error(), "no decision is recorded yet") {
		t.Errorf("amend before the decision = %v, want a refusal", err)
	}
	if _, err := l.Apply(Event{Kind: EventDecide, Actor: "Director Lee", At: at(7), Execution: "demo-a1", Outcome: OutcomeKeepIncumbent, Why: "typo'd"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Event{amend(" ", 8), {Kind: EventAmend, Actor: "Director Lee", At: at(8), Why: "no execution"}} {
		if _, err := l.Apply(bad); !errors.Is(err, ErrTransition) {
			t.Errorf("amend %+v = %v, want a refusal", bad, err)
		}
	}
	audited := len(l.Audit)
	for i, why := range []string{"the rationale meant: not shown at 40 tasks", "and the p95 held"} {
		e, err := l.Apply(amend(why, 9+i))
		if err != nil {
			t.Fatal(err)
		}
		if e.Event != EventAmend || e.From != Decided || e.To != Decided || e.Why != why || !strings.Contains(e.Detail, fmt.Sprint("amendment ", i+1, " of the decision on execution demo-a1")) {
			t.Errorf("audit entry %+v", e)
		}
	}
	if l.State != Decided || l.Outcome != OutcomeKeepIncumbent || len(l.Audit) != audited+2 || len(l.Amendments) != 2 {
		t.Fatalf("after two amendments: %s, %q, %d audit entries, amendments %+v", l.State, l.Outcome, len(l.Audit), l.Amendments)
	}
	for i, a := range l.Amendments {
		if a.Seq != i+1 || a.Execution != "demo-a1" || !a.DecidedAt.Equal(at(7)) || !a.At.Equal(at(9+i)) || a.Actor != "Director Lee" {
			t.Errorf("amendment %d = %+v", i+1, a)
		}
	}
}
