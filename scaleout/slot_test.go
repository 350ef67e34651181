package scaleout

import (
	"context"
	"testing"
	"time"

	"rig/studies"
)

// The gate lets one arm's trials in, up to its slots once they are known,
// refuses another arm's while any runs, and lets a replay in only alone.
func TestTrialGateAdmitsOneArmUpToItsSlots(t *testing.T) {
	g := newTrialGate()
	steps := []struct {
		do   func() bool
		want bool
		what string
	}{
		{func() bool { return g.admit("s/x/a") }, true, "the first trial of arm a"},
		{func() bool { return g.admit("s/x/a") }, false, "a second of a before its slots are known"},
		{func() bool { g.setSlots("s/x/a", 2); return g.admit("s/x/a") }, true, "a second of a, slots 2"},
		{func() bool { return g.admit("s/x/a") }, false, "a third of a, slots 2"},
		{func() bool { return g.admit("s/x/b") }, false, "arm b while a runs"},
		{func() bool { g.done(); return g.admit("s/x/a") }, true, "a again once one of a ended"},
		{func() bool { g.done(); g.done(); return g.admit("s/x/b") }, true, "arm b once a is idle"},
		{func() bool { return g.admit("s/x/b") }, false, "a second of b: its slots are 1 until known"},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Fatalf("%s: admitted %v, want %v", s.what, got, s.want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := g.lockAlone(ctx); err == nil {
		t.Fatal("a replay took the worker while a trial of b ran")
	}
	g.done()
	if err := g.lockAlone(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g.admit("s/x/b") {
		t.Fatal("a trial was admitted beside a replay")
	}
}

// The engine's in-flight limit per queue counts slots: never under the
// slots of one worker serving the design's widest arm.
func TestInFlightCountsSlots(t *testing.T) {
	d := &studies.Design{Arms: []studies.Arm{{Name: "a"}, {Name: "b", Pins: studies.Pins{Slots: 4}}}}
	for _, c := range []struct{ asked, want int }{{0, DefaultInFlight}, {2, 4}, {8, 8}, {MaxInFlight, MaxInFlight}} {
		if got := InFlightFor(d, c.asked); got != c.want {
			t.Errorf("--in-flight %d with an arm of slots 4: %d, want %d", c.asked, got, c.want)
		}
	}
	if got := InFlightFor(&studies.Design{Arms: []studies.Arm{{Name: "a"}}}, 1); got != 1 {
		t.Errorf("--in-flight 1 with slots 1: %d, want 1", got)
	}
}

// A worker whose arm has slots 2 (its fake attempt says so, as the runner
// does once the arm's runtime is up) takes two of the arm's trials from its
// one queue and runs them at once; a trial of another arm waits until both
// ended (handed back while they run), and runs alone.
func TestWorkerRunsItsArmsSlotsAtOnce(t *testing.T) {
	r := newWorkerRig(t)
	f := newFakeCardRuns(4 * time.Second)
	model := r.in.Models["smollm2-135m-instruct"].SHA256
	a1 := r.trial("arm-a/jk/t1/1", "llama-server", model)
	a2 := r.trial("arm-a/jk/t2/1", "llama-server", model)
	b1 := r.trial("arm-b/jk/t1/1", "llama-server", model)
	w := r.start("w1", r.in, f, a1.Queue)
	fake := w.attempt
	w.attempt = func(ctx context.Context, in TrialInput, m string) (TrialResult, error) {
		w.takeSlots(in, map[bool]int{true: 2, false: 1}[mustArm(in.Key) == "arm-a"])
		return fake(ctx, in, m)
	}
	waitFor(t, "w1 polls", 20*time.Second, func() bool { return w.Ready(context.Background()) == nil })
	wa := r.drive("slots-a", a1, a2)
	waitFor(t, "w1 runs both trials of arm-a", 20*time.Second, func() bool { return f.runningOn("w1") == 2 })
	if w.Slots() != 2 {
		t.Errorf("the worker advertises %d slots while serving arm-a, want 2", w.Slots())
	}
	wb := r.drive("slots-b", b1)
	var oa, ob driverOutcome
	if err := wa.Get(context.Background(), &oa); err != nil {
		t.Fatal(err)
	}
	if err := wb.Get(context.Background(), &ob); err != nil {
		t.Fatal(err)
	}
	if len(oa.Errors)+len(ob.Errors) > 0 {
		t.Fatalf("trials ended in errors: %v %v", oa.Errors, ob.Errors)
	}
	ra1, _ := f.get(a1.Key)
	ra2, _ := f.get(a2.Key)
	rb, ok := f.get(b1.Key)
	if !ok || !ra1.start.Before(ra2.end) || !ra2.start.Before(ra1.end) {
		t.Errorf("arm-a's trials did not overlap: %v–%v and %v–%v", ra1.start, ra1.end, ra2.start, ra2.end)
	}
	if rb.start.Before(ra1.end) || rb.start.Before(ra2.end) {
		t.Errorf("arm-b's trial started at %v, beside arm-a's (ended %v, %v): two runtimes on one card", rb.start, ra1.end, ra2.end)
	}
	if w.Slots() != 1 {
		t.Errorf("the worker advertises %d slots after serving arm-b (slots 1)", w.Slots())
	}
	t.Logf("arm-a at once: %s–%s and %s–%s; arm-b from %s, handed back %d times while arm-a ran",
		ra1.start.Format("15:04:05.000"), ra1.end.Format("15:04:05.000"), ra2.start.Format("15:04:05.000"), ra2.end.Format("15:04:05.000"),
		rb.start.Format("15:04:05.000"), ob.Refusals[b1.Key])
}
