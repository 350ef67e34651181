package studies

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fidelityProblems validates the demo design after edit and returns the
// problems found at paths starting with prefix.
func fidelityProblems(t *testing.T, edit func(d *Design), prefix string) []Problem {
	t.Helper()
	d := demoDesign(t)
	edit(d)
	err := Validate(context.Background(), d, ValidateOptions{})
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	var out []Problem
	for _, p := range ve.Problems {
		if strings.HasPrefix(p.Path, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// TestFidelityGuardrailNeedsAReferenceEverywhere: a fidelity_kl guardrail
// with an absolute limit is accepted beside a reference; a job kind that
// names none is refused by name (the guardrail would be unreadable there
// and block every winner), and so is a relative limit (no fraction of the
// reference's zero allows anything).
func TestFidelityGuardrailNeedsAReferenceEverywhere(t *testing.T) {
	abs, rel := 0.05, 0.1
	withGuard := func(g Guardrail) func(d *Design) {
		return func(d *Design) {
			d.JobKinds[0].Reference = demoQ8
			d.Guardrails = []Guardrail{g}
		}
	}
	if len(demoDesign(t).JobKinds) < 2 {
		t.Fatal("fixture: the demo design needs a second job kind")
	}
	got := fidelityProblems(t, withGuard(Guardrail{Metric: MetricFidelityKL, MaxAbsoluteIncrease: &abs}), "guardrails[0]")
	if len(got) != 1 || got[0].Path != "guardrails[0].metric" || !strings.Contains(got[0].Msg, `job_kinds[1] ("fix-test") names none`) {
		t.Errorf("problems %v; want one naming job_kinds[1], which has no reference", got)
	}
	onlyFirst := func(d *Design) {
		withGuard(Guardrail{Metric: MetricFidelityKL, MaxAbsoluteIncrease: &abs})(d)
		d.JobKinds = d.JobKinds[:1]
	}
	if got := fidelityProblems(t, onlyFirst, "guardrails"); len(got) != 0 {
		t.Errorf("a fidelity_kl guardrail with a reference in every job kind refused: %v", got)
	}
	got = fidelityProblems(t, withGuard(Guardrail{Metric: MetricFidelityKL, MaxRelativeIncrease: &rel}), "guardrails[0].max_relative_increase")
	if len(got) != 1 || !strings.Contains(got[0].Msg, "max_absolute_increase in nats/token") {
		t.Errorf("problems %v; want the relative limit refused with the absolute one to use", got)
	}
	if GuardrailUnit(MetricFidelityKL) != "nats/token" {
		t.Errorf("unit %q", GuardrailUnit(MetricFidelityKL))
	}
}

// TestFidelityRankingMeasureRefused: fidelity_kl as a ranking measure is
// refused, first for want of a reference, then, with one, because the
// analysis does not rank by it (it would rank by the grader's scores
// instead), naming the guardrail to use.
func TestFidelityRankingMeasureRefused(t *testing.T) {
	measure := func(ref string) func(d *Design) {
		return func(d *Design) {
			d.JobKinds[0].RankingMeasure = Measure{Name: MetricFidelityKL, Direction: "lower"}
			d.JobKinds[0].Reference = ref
		}
	}
	got := fidelityProblems(t, measure(""), "job_kinds[0].ranking_measure.name")
	if len(got) != 1 || !strings.Contains(got[0].Msg, `"extract-json" names none`) {
		t.Errorf("without a reference: %v; want the missing reference named", got)
	}
	got = fidelityProblems(t, measure(demoQ8), "job_kinds[0].ranking_measure.name")
	if len(got) != 1 || !strings.Contains(got[0].Msg, "does not rank by fidelity yet") || !strings.Contains(got[0].Msg, `"metric": "fidelity_kl"`) {
		t.Errorf("with a reference: %v; want it refused with the guardrail to use", got)
	}
	if got := fidelityProblems(t, func(d *Design) { d.JobKinds[0].Reference = demoQ8 }, "job_kinds[0].ranking_measure"); len(got) != 0 {
		t.Errorf("pass_rate beside a reference refused: %v", got)
	}
}
