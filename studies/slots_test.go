package studies

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// Hashes of the bundled demo design and of a plan of it, as rig computed
// them before slots were a pin. A design that leaves slots out must keep
// both: its frozen snapshot and recorded plan stay valid.
const (
	demoHashBeforeSlots     = "49b07e9d9de966f409f8259dd3b08ef6840a47762e08bae1e411282e61e7be95"
	demoPlanHashBeforeSlots = "d531f70fc8051762c1bdf469edb0617f3305d8b6f4cf4f40e1a0e427c56a22de"
)

func TestSlotsLeftOutHashAsBefore(t *testing.T) {
	d := demoDesign(t)
	for i, a := range d.Arms {
		if a.Pins.Slots != 0 || a.Pins.SlotCount() != 1 {
			t.Fatalf("arms[%d]: slots %d (count %d), want left out and 1", i, a.Pins.Slots, a.Pins.SlotCount())
		}
	}
	canon, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(canon, []byte(`"slots"`)) {
		t.Errorf("the canonical design names slots although the design leaves them out")
	}
	if h, _ := DesignHash(d); h != demoHashBeforeSlots {
		t.Errorf("design hash %s, want %s as before slots were a pin", h, demoHashBeforeSlots)
	}
	p, err := NewPlan(d, demoTasks(5, 3), PlanOptions{Seed: 7, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash != demoPlanHashBeforeSlots {
		t.Errorf("plan hash %s, want %s as before slots were a pin", p.Hash, demoPlanHashBeforeSlots)
	}

	// Slots written change the hash and the runtime instance of the plan.
	for i := range d.Arms {
		d.Arms[i].Pins.Slots = 4
	}
	if h, _ := DesignHash(d); h == demoHashBeforeSlots {
		t.Error("slots 4 did not change the design hash")
	}
	p4, err := NewPlan(d, demoTasks(5, 3), PlanOptions{Seed: 7, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p4.Trials[0].Instance, "|slots=4") {
		t.Errorf("instance %q does not name its 4 slots", p4.Trials[0].Instance)
	}
	for i := range p.Trials {
		if p.Trials[i].Key != p4.Trials[i].Key || p.Trials[i].Block != p4.Trials[i].Block {
			t.Fatalf("trial %d: %v in block %d with slots 4, %v in block %d with one: the slot count must not change the plan's order",
				i, p4.Trials[i].Key, p4.Trials[i].Block, p.Trials[i].Key, p.Trials[i].Block)
		}
	}
}

func TestSlotsPin(t *testing.T) {
	cases := []struct {
		name string
		edit func(m map[string]any)
		kind ProblemKind
		path string
		want string // in the problem's message; "" when the design validates
	}{
		{"extract-json's arms at 4", func(m map[string]any) {
			for i := range 3 {
				pins(m, i)["slots"] = 4
			}
		}, "", "", ""},
		{"aider arms at 2", func(m map[string]any) {
			for i := 3; i < 5; i++ {
				pins(m, i)["slots"] = 2
			}
		}, "", "", ""}, // N Aider runs, each in its own sandbox, on the arm's N slots
		{"explicit 1 beside left out", func(m map[string]any) { pins(m, 2)["slots"] = 1 }, "", "", ""},
		{"shared arms differ", func(m map[string]any) { pins(m, 2)["slots"] = 4 }, KindPinsDiffer, "arms[2].pins.slots", "4 differs from arms[0].pins.slots 1"},
		{"production-values may differ", func(m map[string]any) {
			for i := range m["arms"].([]any) {
				arm(m, i)["pins_source"] = PinsProduction
			}
			pins(m, 2)["slots"] = 4
		}, "", "", ""},
		{"above the bound", func(m map[string]any) {
			for i := range 3 {
				pins(m, i)["slots"] = 65
			}
		}, KindInvalid, "arms[0].pins.slots", "65: run 1..64 trials at once"},
		{"negative", func(m map[string]any) { pins(m, 1)["slots"] = -2 }, KindInvalid, "arms[1].pins.slots", "-2: run 1..64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDesign("design.json", mutated(t, tc.edit))
			if err != nil {
				t.Fatal(err)
			}
			err = Validate(context.Background(), d, ValidateOptions{})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused:\n%v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a *ValidationError", err)
			}
			for _, p := range ve.Problems {
				if p.Path == tc.path && p.Kind == tc.kind && strings.Contains(p.Msg, tc.want) {
					return
				}
			}
			t.Fatalf("no %s problem at %s saying %q:\n%v", tc.kind, tc.path, tc.want, err)
		})
	}
}

// TestSlotsReachThePreflight: the preflight's profile carries the arm's
// slots, so it counts that many contexts of KV cache.
func TestSlotsReachThePreflight(t *testing.T) {
	d := demoDesign(t)
	if p := PreflightProfile(d, d.Arms[0]); p.Slots() != 1 {
		t.Errorf("left out: the preflight sizes %d slots, want 1", p.Slots())
	}
	a := d.Arms[0]
	a.Pins.Slots = 8
	if p := PreflightProfile(d, a); p.Slots() != 8 || p.Context != a.Pins.Context {
		t.Errorf("slots 8: the preflight sizes %d slots of context %d, want 8 of %d", p.Slots(), p.Context, a.Pins.Context)
	}
}

// TestSlotsDifferNamed: production-values arms at different slot counts
// are named for the report; arms at one count are not.
func TestSlotsDifferNamed(t *testing.T) {
	d := demoDesign(t)
	if w := d.SlotsDiffer(); len(w) != 0 {
		t.Errorf("every arm at one slot, warnings %q", w)
	}
	d.Arms[2].Pins.Slots = 4
	w := d.SlotsDiffer()
	if len(w) == 0 {
		t.Fatal("arms at 1 and 4 slots: no warning")
	}
	if !strings.Contains(w[0], d.Arms[2].Name+" 4") || !strings.Contains(w[0], "compare loads") {
		t.Errorf("warning %q does not name %s at 4 slots and what it means", w[0], d.Arms[2].Name)
	}
}

// An arm with slots is priced stretch by stretch: the model time of its
// trials in a block divided by the speed-up of the trials in flight, and
// the table says so; at one slot the price is as before.
func TestDryRunPricesSlots(t *testing.T) {
	d := demoDesign(t)
	p, err := NewPlan(d, demoTasks(10, 4), PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	price := func() ArmCost {
		e, err := DryRun(d, p, demoSpeeds(), func(TrialKey) int { return 400 })
		if err != nil {
			t.Fatalf("DryRun: %v", err)
		}
		for _, c := range e.Arms {
			if c.Arm == d.Arms[0].Name {
				return c
			}
		}
		t.Fatalf("no price for %s", d.Arms[0].Name)
		return ArmCost{}
	}
	one := price()
	d.Arms[0].Pins.Slots = 4
	four := price()
	perTrial := 400.0/2000 + float64(d.Arms[0].Pins.StopCap)/200
	var want float64
	for lo := 0; lo < len(p.Trials); {
		hi := lo + 1
		for hi < len(p.Trials) && p.Trials[hi].Key.Arm == p.Trials[lo].Key.Arm && p.Trials[hi].Block == p.Trials[lo].Block && p.Trials[hi].Instance == p.Trials[lo].Instance {
			hi++
		}
		if p.Trials[lo].Key.Arm == d.Arms[0].Name {
			want += float64(hi-lo) * perTrial / SlotSpeedup(min(4, hi-lo))
		}
		lo = hi
	}
	want += float64(four.Loads) * 2
	if got := four.WallTime.Seconds(); got < want-0.01 || got > want+0.01 {
		t.Errorf("4 slots priced %.2fs, want %.2fs", got, want)
	}
	if four.WallTime >= one.WallTime || four.Slots != 4 || one.Slots != 1 || one.SlotSpeedup != 1 {
		t.Errorf("4 slots %+v, 1 slot %+v: want 4 slots priced shorter", four, one)
	}
	e, _ := DryRun(d, p, demoSpeeds(), func(TrialKey) int { return 400 })
	var buf bytes.Buffer
	if err := e.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "4 slots at 1.20× one slot's speed") || !strings.Contains(buf.String(), "slots: an arm's trials of a block go out together") {
		t.Errorf("the table does not say how slots were priced:\n%s", buf.String())
	}
}
