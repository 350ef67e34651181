package governor

import (
	"context"
	"strings"
	"testing"
	"time"
)

// fakeClock is a settable clock for Progress: the test moves time, not the
// wall.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// hungVerdict is the hung-runtime policy's verdict on p's reading now.
func hungVerdict(t *testing.T, p *Progress) Verdict {
	t.Helper()
	r, err := p.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, pol := range buildPolicies(DefaultConfig()) {
		if pol.name() == PolicyHungRuntime {
			return pol.check(Snapshot{Now: r.At, Readings: map[string]Reading{"progress": r}, TrialActive: true})
		}
	}
	t.Fatal("no hung-runtime policy in the default config")
	return Verdict{}
}

// Several calls in flight on one runtime, each fed its own progress (a
// fake progress source: the test feeds the totals): one that stops
// advancing while the others run is a hung runtime; one call ending does
// not stop the others being watched; a call that never gets its first
// token beside others that run is caught at the first-token limit.
func TestProgressSeesEverySlot(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	p := NewProgress()
	p.now = clk.now
	limit := time.Duration(DefaultConfig().Policies[PolicyHungRuntime].Limit * float64(time.Second))
	for _, id := range []string{"a", "b", "c"} {
		p.BeginCall(id)
	}
	tokens := 0
	step := func(d time.Duration, ids ...string) {
		clk.advance(d)
		tokens += 10
		for _, id := range ids {
			p.TokensOf(id, tokens)
		}
	}
	step(time.Second, "a", "b", "c")
	if v := hungVerdict(t, p); v.Violated {
		t.Fatalf("every slot advancing: %s", v.Reason)
	}
	// c stops advancing; a and b go on.
	for elapsed := time.Duration(0); elapsed <= limit; elapsed += 5 * time.Second {
		step(5*time.Second, "a", "b")
	}
	v := hungVerdict(t, p)
	if !v.Violated || !strings.Contains(v.Reason, "of 3 calls in flight") {
		t.Fatalf("slot c stalled past %s while a and b advanced: verdict %+v, want hung naming the calls in flight", limit, v)
	}
	// c ends (its call returned): a and b advance, nothing is hung; then
	// a ends and b, still watched, stalls.
	p.EndCall("c")
	step(time.Second, "a", "b")
	if v := hungVerdict(t, p); v.Violated {
		t.Fatalf("after the stalled call ended: %s", v.Reason)
	}
	p.EndCall("a")
	clk.advance(limit + time.Second)
	if r, _ := p.Read(context.Background()); r.Values[KeyActive] != 1 || r.Values[KeyCalls] != 1 {
		t.Fatalf("a's end stopped b being watched: %v", r.Values)
	}
	if v := hungVerdict(t, p); !v.Violated {
		t.Fatal("b stalled past the limit after a ended: not caught")
	}
	// A call with no first token beside one that runs.
	p.EndCall("b")
	p.BeginCall("d")
	p.BeginCall("e")
	first := DefaultConfig().Policies[PolicyHungRuntime].FirstToken
	for elapsed := time.Duration(0); elapsed <= first; elapsed += 5 * time.Second {
		step(5*time.Second, "d")
	}
	if v := hungVerdict(t, p); !v.Violated || !strings.Contains(v.Reason, "no first token") {
		t.Fatalf("e without a first token for %s beside d: verdict %+v", first, v)
	}
}
