package studies

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestExcludeTasksLeavesThemOutOfThePlanWithTheirReason(t *testing.T) {
	ctx := context.Background()
	fx := newFreezeFixture(t)
	plain, err := DesignHash(fx.design)
	if err != nil {
		t.Fatal(err)
	}
	fx.design.ExcludeTasks = []ExcludedTask{{JobKind: "extract-json", Task: "ej-2", Why: "prompt longer than the context"}}
	if err := Validate(ctx, fx.design, fx.opts); err != nil {
		t.Fatalf("a valid exclusion is refused: %v", err)
	}
	if h, _ := DesignHash(fx.design); h == plain {
		t.Error("the exclusion is not part of the design hash")
	}
	reg, err := Fingerprint(ctx, fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Freeze(ctx, FreezeInput{Design: fx.design, Registered: reg, Validate: fx.opts}, fx.assets)
	if err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if got := strings.Join(s.Tasks()["extract-json"], ","); got != "ej-1,ej-3" {
		t.Errorf("frozen tasks = %s, want ej-2 left out", got)
	}
	if x := s.Excluded(); len(x) != 1 || x[0].Task != "ej-2" || x[0].Why == "" {
		t.Errorf("snapshot records exclusions %+v, want ej-2 with its reason", x)
	}
	plan, err := NewPlan(fx.design, s.Tasks(), PlanOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range plan.Trials {
		if tr.Key.Task == "ej-2" {
			t.Fatalf("the plan runs the excluded task: %+v", tr.Key)
		}
	}
	if err := s.Verify(); err != nil {
		t.Errorf("a snapshot with exclusions does not verify: %v", err)
	}
}

func TestExcludeTasksRefusals(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		x    []ExcludedTask
		want string
	}{
		{"no reason", []ExcludedTask{{JobKind: "extract-json", Task: "ej-2"}}, "exclude_tasks[0].why: missing"},
		{"unknown job kind", []ExcludedTask{{JobKind: "nope", Task: "ej-2", Why: "x"}}, `exclude_tasks[0].job_kind: "nope" is not a job kind`},
		{"twice", []ExcludedTask{{JobKind: "extract-json", Task: "ej-2", Why: "a"}, {JobKind: "extract-json", Task: "ej-2", Why: "b"}}, "is already exclude_tasks[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx := newFreezeFixture(t)
			fx.design.ExcludeTasks = c.x
			err := Validate(ctx, fx.design, fx.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v, want %q", err, c.want)
			}
		})
	}
	// A task the bank lacks is refused where the bank is read: at register.
	fx := newFreezeFixture(t)
	fx.design.ExcludeTasks = []ExcludedTask{{JobKind: "extract-json", Task: "ej-9", Why: "typo"}}
	_, err := Fingerprint(ctx, fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup})
	if err == nil || !strings.Contains(err.Error(), `exclude_tasks[0].task: "ej-9" is not among the counted tasks`) {
		t.Errorf("Fingerprint with an unknown task = %v", err)
	}
	// Leaving every task out leaves nothing to run.
	fix := fx.design.JobKinds[1].Name // the fixture's bankB: ft-1, ft-2
	fx.design.ExcludeTasks = []ExcludedTask{{JobKind: fix, Task: "ft-1", Why: "a"}, {JobKind: fix, Task: "ft-2", Why: "b"}}
	if _, err := Fingerprint(ctx, fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup}); err == nil || !strings.Contains(err.Error(), "every task") {
		t.Errorf("Fingerprint with the whole bank left out = %v", err)
	}
}

// A register with rig's own derived key, of the same design after its bank
// changed, says the name is taken and how to go on, never "idempotency key".
func TestRegisterDerivedKeyConflictIsANameTaken(t *testing.T) {
	ctx := context.Background()
	fx := newFreezeFixture(t)
	registered := map[string]bool{}
	deps := RegisterDeps{Licences: fakeLicences{}, Assets: fx.assets, Exists: func(n string) bool { return registered[n] }}
	in := RegisterInput{Design: fx.design, File: "design.yaml", Key: "register-derived", KeyDerived: true, Actor: "ana", At: at(0), Resolve: ResolveOptions{Lookup: fx.opts.Lookup}}
	reg, _, err := Register(ctx, in, deps)
	if err != nil {
		t.Fatal(err)
	}
	registered[reg.Name] = true
	if err := os.WriteFile(fx.files["bankA"], []byte("{\"id\":\"ej-1\"}\n{\"id\":\"ej-2\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in.Prev, in.PrevAssets = &reg.Request, reg.Assets
	_, _, err = Register(ctx, in, deps)
	if !errors.Is(err, ErrNameTaken) || errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("register after the bank changed = %v, want ErrNameTaken only", err)
	}
	t.Logf("register after the bank changed: %v", err)
	for _, want := range []string{"bank:extract-json changed", "rig study withdraw " + fx.design.Name, "--name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "idempotency key") {
		t.Errorf("the refusal reports rig's own key as the user's: %v", err)
	}
	// The user's own key keeps its meaning.
	in.KeyDerived = false
	if _, _, err := Register(ctx, in, deps); !errors.Is(err, ErrIdempotencyConflict) {
		t.Errorf("a user's key reused = %v, want ErrIdempotencyConflict", err)
	}
}

func TestWithdraw(t *testing.T) {
	l := NewLifecycle("h1", "ana", at(0))
	if _, err := l.Apply(Event{Kind: EventWithdraw, Actor: "ana", At: at(1)}); err == nil {
		t.Error("a withdrawal without a reason was accepted")
	}
	for _, ev := range []Event{
		{Kind: EventReview, Actor: "rev", At: at(1), Review: pass("h1")},
		{Kind: EventApprove, Actor: "Director Lee", At: at(2)},
		{Kind: EventFreeze, Actor: "ana", At: at(3), SnapshotHash: "s1"},
	} {
		if _, err := l.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	e, err := l.Apply(Event{Kind: EventWithdraw, Actor: "ana", At: at(4), Why: "two prompts too long"})
	if err != nil || l.State != Withdrawn || e.From != Frozen || e.Why != "two prompts too long" {
		t.Fatalf("withdraw a frozen study = %+v, %v (state %s)", e, err, l.State)
	}
	if _, err := l.Apply(Event{Kind: EventRun, Actor: "ana", At: at(5), Execution: "x1"}); !errors.Is(err, ErrTransition) {
		t.Errorf("a withdrawn study ran: %v", err)
	}
	// Once a counted run has started, the receipts are evidence.
	ran := NewLifecycle("h1", "ana", at(0))
	for _, ev := range []Event{
		{Kind: EventReview, Actor: "rev", At: at(1), Review: pass("h1")},
		{Kind: EventApprove, Actor: "Director Lee", At: at(2)},
		{Kind: EventFreeze, Actor: "ana", At: at(3), SnapshotHash: "s1"},
		{Kind: EventRun, Actor: "ana", At: at(4), Execution: "x1"},
	} {
		if _, err := ran.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ran.Apply(Event{Kind: EventWithdraw, Actor: "ana", At: at(5), Why: "w"}); !errors.Is(err, ErrTransition) {
		t.Errorf("withdraw while running = %v", err)
	}
	if _, err := ran.Apply(Event{Kind: EventCancel, Actor: "ana", At: at(6), Execution: "x1", Why: "stop"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ran.Apply(Event{Kind: EventWithdraw, Actor: "ana", At: at(7), Why: "w"}); !errors.Is(err, ErrTransition) || ran.State != Frozen {
		t.Errorf("withdraw after a cancelled counted run = %v (state %s)", err, ran.State)
	}
}
