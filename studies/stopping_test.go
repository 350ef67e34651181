package studies

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rig/tasks"
)

func TestStoppingAcceptedAndResolved(t *testing.T) {
	for _, rule := range []map[string]any{
		{"method": "group_sequential", "spending": "obrien_fleming", "looks": []any{0.25, 0.5, 1}, "futility": map[string]any{}},
		{"method": "anytime", "futility": map[string]any{"difference": 0.1, "beta": 0.02}, "alpha": 0.01},
		{"method": "group_sequential", "spending": "pocock"},
	} {
		if ve := validateEdited(t, func(m map[string]any) { m["stopping"] = rule }); ve != nil {
			t.Fatalf("%v refused:\n%v", rule, ve)
		}
	}
	d, err := ParseDesign("design.json", mutated(t, func(m map[string]any) {
		m["stopping"] = map[string]any{"method": "group_sequential", "spending": "obrien_fleming", "futility": map[string]any{}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := d.ResolvedStopping()
	if r == nil || r.Alpha != d.DecisionRule.Alpha || r.Futility != d.Power.SmallestDetectableDifference || r.Discordance != d.Power.PilotDiscordance {
		t.Fatalf("defaults not taken from the design: %+v (rule alpha %v, power %+v)", r, d.DecisionRule.Alpha, d.Power)
	}
	if p := r.Check(); p != nil {
		t.Fatalf("the resolved rule does not check: %v", p)
	}
	if demoDesign(t).ResolvedStopping() != nil {
		t.Error("a design without a stopping rule resolved one")
	}
}

func TestStoppingRefused(t *testing.T) {
	tests := []struct {
		name string
		rule map[string]any
		path string
		want string
	}{
		{"unknown method", map[string]any{"method": "peek"}, "stopping.method", "anytime"},
		{"no spending", map[string]any{"method": "group_sequential"}, "stopping.spending", "obrien_fleming"},
		{"spending on anytime", map[string]any{"method": "anytime", "spending": "pocock"}, "stopping.spending", "remove spending"},
		{"looks on anytime", map[string]any{"method": "anytime", "looks": []any{0.5, 1}}, "stopping.looks", "every block"},
		{"looks not ending at 1", map[string]any{"method": "group_sequential", "spending": "pocock", "looks": []any{0.5, 0.8}}, "stopping.looks[1]", "end the looks with 1"},
		{"looks going down", map[string]any{"method": "group_sequential", "spending": "pocock", "looks": []any{0.5, 0.4, 1}}, "stopping.looks[1]", "increasing"},
		{"alpha above the rule's", map[string]any{"method": "anytime", "alpha": 0.1}, "stopping.alpha", "decision_rule.alpha"},
		{"difference above the discordance", map[string]any{"method": "anytime", "futility": map[string]any{"difference": 0.9}}, "stopping.futility.difference", "discordance"},
		{"beta too large", map[string]any{"method": "anytime", "futility": map[string]any{"beta": 0.6}}, "stopping.futility.beta", "0.05"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ve := validateEdited(t, func(m map[string]any) { m["stopping"] = tc.rule })
			if ve == nil {
				t.Fatalf("%v accepted", tc.rule)
			}
			found := false
			for _, p := range ve.Problems {
				found = found || (p.Path == tc.path && strings.Contains(p.Msg, tc.want))
			}
			if !found {
				t.Errorf("problems %v, want one at %s mentioning %q", ve, tc.path, tc.want)
			}
		})
	}
}

// TestStoppingIsFrozen: the rule is part of the design hash, and a design
// without one hashes as it did before the field existed (no key written).
func TestStoppingIsFrozen(t *testing.T) {
	d := demoDesign(t)
	c, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(c, []byte(`"stopping"`)) {
		t.Fatal("a design without a stopping rule writes a stopping key, changing every existing design hash")
	}
	h0, _ := DesignHash(d)
	d.Stopping = &Stopping{Method: StopGroupSequential, Spending: SpendOBrienFleming}
	h1, _ := DesignHash(d)
	d.Stopping.Spending = SpendPocock
	h2, _ := DesignHash(d)
	if h0 == h1 || h1 == h2 {
		t.Errorf("design hash does not follow the stopping rule: %s %s %s", h0, h1, h2)
	}
}

// TestExampleStoppingBlock: the commented stopping block of `rig study
// init`'s template, uncommented, parses, validates and meets the schema.
func TestExampleStoppingBlock(t *testing.T) {
	var out []string
	in := false
	for _, line := range strings.Split(string(ExampleDesign()), "\n") {
		if strings.HasPrefix(line, "# stopping:") {
			in = true
		}
		if in && strings.HasPrefix(line, "# ") {
			line = strings.TrimPrefix(line, "# ")
		}
		out = append(out, line)
	}
	if !in {
		t.Fatal("the template has no commented stopping block")
	}
	d, err := ParseDesign("design.yaml", []byte(strings.Join(out, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if d.Stopping == nil || d.Stopping.Method != StopGroupSequential || d.Stopping.Futility == nil {
		t.Fatalf("uncommented block read as %+v", d.Stopping)
	}
	if err := Validate(context.Background(), d, ValidateOptions{File: "design.yaml"}); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	c := loadSchema(t)
	if errs := c.validate(v); len(errs) > 0 {
		t.Errorf("schema refuses the stopping block: %v", errs)
	}
	// The rule the runner gets monitors the design's pairs.
	if r := d.ResolvedStopping(); r.Method != StopGroupSequential || len(d.ResolvedPairs()) == 0 {
		t.Errorf("rule %+v over pairs %v", r, d.ResolvedPairs())
	}
}

const stoppingExamplePath = "../examples/stopping-study/design.json"

// TestStoppingExample: `make demo-stopping` runs the bundled stopping
// study, which must validate as it stands and carry an honest rule: alpha
// from the decision rule, a look after every block, a futility bound at
// the stated difference, one monitored pair whose arms differ only in how
// the prompt reaches the same model, and a power plan stated for the tasks
// the bank really gives.
func TestStoppingExample(t *testing.T) {
	d, err := LoadDesign(context.Background(), stoppingExamplePath, ValidateOptions{})
	if err != nil {
		t.Fatalf("the stopping example does not validate: %v", err)
	}
	s := d.Stopping
	if s == nil || s.Method != StopGroupSequential || s.Spending == "" || s.Looks != nil || s.Alpha != 0 || s.Futility == nil {
		t.Fatalf("stopping %+v: want group-sequential, alpha from the decision rule, a look at every block, futility", s)
	}
	r := d.ResolvedStopping()
	if r.Alpha != d.DecisionRule.Alpha || r.Futility != d.Power.SmallestDetectableDifference || r.Check() != nil {
		t.Errorf("resolved rule %+v (decision alpha %v, power %+v): %v", r, d.DecisionRule.Alpha, d.Power, r.Check())
	}
	if pairs := d.ResolvedPairs(); len(pairs) != 1 {
		t.Fatalf("monitors %d pairs, want the one the rule names", len(pairs))
	}
	if len(d.Arms) != 2 {
		t.Fatalf("%d arms, want two", len(d.Arms))
	}
	a, b := d.Arms[0], d.Arms[1]
	if a.PromptFormat == b.PromptFormat || a.Model != b.Model || !reflect.DeepEqual(a.Pins, b.Pins) || a.Runtime != b.Runtime {
		t.Errorf("arms %s and %s differ in more than the prompt format (or not in it)", a.Name, b.Name)
	}
	jk := d.JobKinds[0]
	b0, err := tasks.LoadBank(filepath.Join(filepath.Dir(stoppingExamplePath), jk.TaskBank))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(SampleByTemplate(b0.Select(jk.IncludeHoldout), jk.SampleTasks)); n != d.Power.TaskCount {
		t.Errorf("samples %d tasks, but the power was stated for %d", n, d.Power.TaskCount)
	}
	// That the stated power detects the stated difference is analysis's
	// sum: run's TestStoppingExampleIsPowered.
}
