package studies

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func at(min int) time.Time { return time.Date(2026, 11, 30, 3, min, 0, 0, time.UTC) }

func pass(hash string) *Review {
	return &Review{Reviewer: "outside-model", Verdict: "pass", LicenceLine: "licences: 7 items checked against registry.json, no banned use", DesignHash: hash}
}

func TestLifecycleHappyPath(t *testing.T) {
	l := NewLifecycle("h1", "ana", at(0))
	steps := []struct {
		ev   Event
		want State
	}{
		{Event{Kind: EventReview, Actor: "ana", At: at(1), Review: pass("h1")}, Reviewed},
		{Event{Kind: EventApprove, Actor: "Director Lee", At: at(2), Why: "sentences read"}, Approved},
		{Event{Kind: EventFreeze, Actor: "ana", At: at(3), SnapshotHash: "s1"}, Frozen},
		{Event{Kind: EventRun, Actor: "ana", At: at(4), Execution: "demo-a1"}, Running},
		{Event{Kind: EventCancel, Actor: "ana", At: at(5), Execution: "demo-a1", Why: "card needed"}, Frozen},
		{Event{Kind: EventRun, Actor: "ana", At: at(6), Execution: "demo-a2"}, Running},
		{Event{Kind: EventFinish, Actor: "daemon", At: at(7), Execution: "demo-a2"}, Frozen},
		{Event{Kind: EventDecide, Actor: "Director Lee", At: at(8), Execution: "demo-a2", Outcome: OutcomeKeepIncumbent, Why: "not shown at 40 tasks"}, Decided},
	}
	for i, s := range steps {
		from := l.State
		e, err := l.Apply(s.ev)
		if err != nil {
			t.Fatalf("step %d %s: %v", i, s.ev.Kind, err)
		}
		if l.State != s.want || e.From != from || e.To != s.want || e.Actor != s.ev.Actor || !e.At.Equal(s.ev.At) || e.Why != s.ev.Why {
			t.Fatalf("step %d: state %s, audit %+v; want %s from %s", i, l.State, e, s.want, from)
		}
	}
	if len(l.Audit) != len(steps)+1 {
		t.Errorf("audit has %d entries, want %d (register + each step)", len(l.Audit), len(steps)+1)
	}
	if l.Director != "Director Lee" || l.Outcome != OutcomeKeepIncumbent || len(l.Cancelled) != 1 || len(l.Finished) != 1 {
		t.Errorf("lifecycle record %+v", l)
	}
}

func TestLifecycleRefuses(t *testing.T) {
	frozen := func() *Lifecycle {
		l := NewLifecycle("h1", "ana", at(0))
		for _, ev := range []Event{
			{Kind: EventReview, Actor: "ana", At: at(1), Review: pass("h1")},
			{Kind: EventApprove, Actor: "Director Lee", At: at(2)},
			{Kind: EventFreeze, Actor: "ana", At: at(3), SnapshotHash: "s1"},
		} {
			if _, err := l.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	noLine := pass("h1")
	noLine.LicenceLine = "n/a"
	tests := []struct {
		name    string
		l       func() *Lifecycle
		ev      Event
		wantErr error
		wantMsg string
	}{
		{"pass without licence line", func() *Lifecycle { return NewLifecycle("h1", "a", at(0)) },
			Event{Kind: EventReview, Actor: "a", At: at(1), Review: noLine}, ErrNoLicenceLine, "does not count"},
		{"review of another design", func() *Lifecycle { return NewLifecycle("h1", "a", at(0)) },
			Event{Kind: EventReview, Actor: "a", At: at(1), Review: pass("h0")}, ErrTransition, "review the current design"},
		{"approve a draft", func() *Lifecycle { return NewLifecycle("h1", "a", at(0)) },
			Event{Kind: EventApprove, Actor: "Director", At: at(1)}, ErrTransition, "passing review"},
		{"approve without a name", func() *Lifecycle { return NewLifecycle("h1", "a", at(0)) },
			Event{Kind: EventApprove, Actor: " ", At: at(1)}, ErrTransition, "no actor"},
		{"no time", func() *Lifecycle { return NewLifecycle("h1", "a", at(0)) },
			Event{Kind: EventReview, Actor: "a", Review: pass("h1")}, ErrTransition, "no time"},
		{"revise a frozen design", frozen, Event{Kind: EventRevise, Actor: "a", At: at(4), DesignHash: "h2"}, ErrTransition, "never changes"},
		{"decide without a finished execution", frozen, Event{Kind: EventDecide, Actor: "d", At: at(4), Execution: "x-a1", Outcome: "keep the incumbent", Why: "w"}, ErrTransition, "did not run to the end"},
		{"finish another execution", func() *Lifecycle {
			l := frozen()
			l.Apply(Event{Kind: EventRun, Actor: "a", At: at(4), Execution: "x-a1"})
			return l
		}, Event{Kind: EventFinish, Actor: "a", At: at(5), Execution: "x-a2"}, ErrTransition, "not the one running"},
		{"second run while running", func() *Lifecycle {
			l := frozen()
			l.Apply(Event{Kind: EventRun, Actor: "a", At: at(4), Execution: "x-a1"})
			return l
		}, Event{Kind: EventRun, Actor: "a", At: at(5), Execution: "x-a2"}, ErrTransition, "one execution at a time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.l()
			before := *l
			_, err := l.Apply(tc.ev)
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrTransition) {
				t.Fatalf("Apply = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
			if l.State != before.State || len(l.Audit) != len(before.Audit) || len(l.Reviews) != len(before.Reviews) {
				t.Errorf("refused event changed the lifecycle: %+v → %+v", before, *l)
			}
		})
	}
}

func TestFailingReviewRecordedStaysDraft(t *testing.T) {
	l := NewLifecycle("h1", "a", at(0))
	r := pass("h1")
	r.Verdict = "fail"
	e, err := l.Apply(Event{Kind: EventReview, Actor: "a", At: at(1), Review: r, Why: "sentence 3 is weak"})
	if err != nil {
		t.Fatal(err)
	}
	if l.State != Draft || e.To != Draft || len(l.Reviews) != 1 {
		t.Errorf("failing review: state %s, audit %+v, reviews %d", l.State, e, len(l.Reviews))
	}
}

func TestReviseLapsesApproval(t *testing.T) {
	l := NewLifecycle("h1", "a", at(0))
	l.Apply(Event{Kind: EventReview, Actor: "a", At: at(1), Review: pass("h1")})
	l.Apply(Event{Kind: EventApprove, Actor: "Director Lee", At: at(2)})
	if _, err := l.Apply(Event{Kind: EventRevise, Actor: "a", At: at(3), DesignHash: "h2"}); err != nil {
		t.Fatal(err)
	}
	if l.State != Draft || l.Director != "" || l.DesignHash != "h2" {
		t.Errorf("after revise: %+v", l)
	}
	if _, err := l.Apply(Event{Kind: EventFreeze, Actor: "a", At: at(4), SnapshotHash: "s"}); !errors.Is(err, ErrTransition) {
		t.Errorf("freeze after revise = %v, want refused", err)
	}
}
