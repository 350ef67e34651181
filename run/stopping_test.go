package run

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"rig/analysis"
	"rig/studies"
	"rig/studies/studytest"
)

// TestStoppingVocabularyIsAnalysiss: studies keeps the stopping rule's
// words itself (it imports no analysis); they must be analysis's, or a
// design that validates names a method the monitor does not know.
func TestStoppingVocabularyIsAnalysiss(t *testing.T) {
	for _, c := range []struct{ design, analysis string }{
		{studies.StopAnytime, string(analysis.Anytime)},
		{studies.StopGroupSequential, string(analysis.GroupSequential)},
		{studies.SpendOBrienFleming, string(analysis.OBrienFleming)},
		{studies.SpendPocock, string(analysis.Pocock)},
	} {
		if c.design != c.analysis {
			t.Errorf("studies says %q where analysis says %q", c.design, c.analysis)
		}
	}
	if studies.DefaultFutilityBeta != analysis.DefaultFutilityBeta {
		t.Errorf("studies.DefaultFutilityBeta %v, analysis.DefaultFutilityBeta %v", studies.DefaultFutilityBeta, analysis.DefaultFutilityBeta)
	}
}

// TestStoppingCheckIsAnalysissValidate holds the design's check of its
// resolved rule (studies.ResolvedStopping.Check, which validation reports)
// to the monitor's own (analysis.Stopping.Validate) over a grid of rules:
// the same first field, problem and fix, or both none. Both are
// internal/stoprule's check; this holds what each makes of it (the design's
// resolved fields, analysis's typed ones, and each error type) to the
// other. A design that validates then never holds a rule the runner
// refuses at its first check.
func TestStoppingCheckIsAnalysissValidate(t *testing.T) {
	methods := []string{"", studies.StopAnytime, studies.StopGroupSequential, "peek"}
	spendings := []string{"", studies.SpendOBrienFleming, studies.SpendPocock, "linear"}
	looks := [][]float64{nil, {1}, {0.5, 1}, {0.5, 0.8}, {0.5, 0.4, 1}, {0, 1}, {-0.2, 1}, {1.5}, {0.25, 0.5, 0.75, 1}}
	values := []float64{0, 0.01, 0.05, 0.3, 0.49, 0.5, 0.9, 1, 1.5, -0.1}
	n := 0
	for _, m := range methods {
		for _, sp := range spendings {
			for _, lk := range looks {
				for _, alpha := range values {
					for _, fut := range values {
						for _, beta := range []float64{0, 0.02, 0.5, -0.1} {
							for _, psi := range []float64{0, 0.3, 1, 1.5, -0.1} {
								r := studies.ResolvedStopping{Method: m, Spending: sp, Looks: lk, Alpha: alpha, Futility: fut, FutilityBeta: beta, Discordance: psi}
								n++
								got, err := r.Check(), analysisStopping(r).Validate()
								var want *analysis.FieldError
								if err != nil {
									want = err.(*analysis.FieldError)
								}
								switch {
								case got == nil && want == nil:
								case got == nil || want == nil:
									t.Fatalf("%+v: studies finds %v, analysis %v", r, got, err)
								case got.Path != want.Field || got.Msg != fmt.Sprintf("%s (%s)", want.Problem, want.Fix) || got.Kind != studies.KindInvalid:
									t.Fatalf("%+v: studies finds %s: %s, analysis %s: %s (%s)", r, got.Path, got.Msg, want.Field, want.Problem, want.Fix)
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d rules agree", n)
}

// TestStoppingRuleResolvesTheDesign: the monitor's rule takes every field
// and default the design resolved, and a design without a rule has none.
func TestStoppingRuleResolvesTheDesign(t *testing.T) {
	d := studytest.DemoDesign(t)
	if StoppingRule(d) != nil {
		t.Fatal("a design without a stopping rule got one")
	}
	d.Stopping = &studies.Stopping{Method: studies.StopGroupSequential, Spending: studies.SpendPocock, Looks: []float64{0.5, 1},
		Futility: &studies.Futility{Beta: 0.02}}
	got := StoppingRule(d)
	want := analysis.Stopping{Method: analysis.GroupSequential, Spending: analysis.Pocock, Looks: []float64{0.5, 1}, Alpha: d.DecisionRule.Alpha,
		Futility: d.Power.SmallestDetectableDifference, FutilityBeta: 0.02, Discordance: d.Power.PilotDiscordance}
	if got == nil || fmt.Sprint(*got) != fmt.Sprint(want) {
		t.Fatalf("rule %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the demo's resolved rule is refused by the monitor: %v", err)
	}
}

// TestStoppingExampleIsPowered: the plan `make demo-stopping` sizes its
// stopping rule for detects the stated difference, or the example would end
// "underpowered" (studies' TestStoppingExample checks the rest of it).
func TestStoppingExampleIsPowered(t *testing.T) {
	d, err := studies.LoadDesign(context.Background(), filepath.Join(studytest.Root(t), "examples", "stopping-study", "design.json"), studies.ValidateOptions{})
	if err != nil {
		t.Fatalf("the stopping example does not validate: %v", err)
	}
	md, ok := analysis.MinDetectable(d.Power.TaskCount, d.Power.PilotDiscordance, d.DecisionRule.Alpha, d.Power.Power)
	if !ok || md > d.Power.SmallestDetectableDifference {
		t.Errorf("%d tasks detect %.3f (ok %v), more than the stated %v: the example would end \"underpowered\"", d.Power.TaskCount, md, ok, d.Power.SmallestDetectableDifference)
	}
}
