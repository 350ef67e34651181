package studies

import (
	"context"
	"errors"
	"slices"
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

// TestFidelityRankingMeasureAccepted: fidelity_kl ranks a job kind with a
// reference whose pairs leave the reference out (it is the yardstick, KL 0
// by construction), lower being better.
func TestFidelityRankingMeasureAccepted(t *testing.T) {
	got := fidelityProblems(t, func(d *Design) {
		d.JobKinds[0].RankingMeasure = Measure{Name: MetricFidelityKL, Direction: "lower"}
		d.JobKinds[0].Reference = demoQ8
		d.Pairs = []Pair{{Challenger: demoQ8Olla, Incumbent: demoQ4, JobKind: d.JobKinds[0].Name}}
	}, "job_kinds[0]")
	if len(got) != 0 {
		t.Errorf("fidelity_kl ranking beside a reference no pair names refused: %v", got)
	}
	if got := fidelityProblems(t, func(d *Design) { d.JobKinds[0].Reference = demoQ8 }, "job_kinds[0].ranking_measure"); len(got) != 0 {
		t.Errorf("pass_rate beside a reference refused: %v", got)
	}
}

// TestFidelityRankingMeasureRefused: fidelity_kl as a ranking measure is
// refused, by field and with the fix, without a reference, with "higher",
// when a pair of the job kind names the reference as incumbent or as
// challenger (the demo's default pairs make Q8_0 a challenger), and beside a
// stopping rule, whose looks come before fidelity is scored.
func TestFidelityRankingMeasureRefused(t *testing.T) {
	measure := func(ref, dir string, pairs []Pair) func(d *Design) {
		return func(d *Design) {
			d.JobKinds[0].RankingMeasure = Measure{Name: MetricFidelityKL, Direction: dir}
			d.JobKinds[0].Reference = ref
			if pairs != nil {
				d.Pairs = pairs
			}
		}
	}
	kind := "extract-json"
	otherPair := []Pair{{Challenger: demoQ8Olla, Incumbent: demoQ4, JobKind: kind}}
	got := fidelityProblems(t, measure("", "lower", otherPair), "job_kinds[0].ranking_measure.name")
	if len(got) != 1 || !strings.Contains(got[0].Msg, `"extract-json" names none`) {
		t.Errorf("without a reference: %v; want the missing reference named", got)
	}
	got = fidelityProblems(t, measure(demoQ8, "higher", otherPair), "job_kinds[0].ranking_measure.direction")
	if len(got) != 1 || !strings.Contains(got[0].Msg, `"direction": "lower"`) {
		t.Errorf("direction higher: %v; want it refused with lower to use", got)
	}
	got = fidelityProblems(t, measure(demoQ4, "lower", otherPair), "job_kinds[0].reference")
	if len(got) != 1 || !strings.Contains(got[0].Msg, "is the incumbent of") || !strings.Contains(got[0].Msg, "name another arm as reference") {
		t.Errorf("reference as incumbent: %v; want it refused naming the fix", got)
	}
	got = fidelityProblems(t, measure(demoQ8, "lower", nil), "job_kinds[0].reference")
	if len(got) != 1 || !strings.Contains(got[0].Msg, "is the challenger of "+demoQ8+" vs "+demoQ4) {
		t.Errorf("reference as the demo's challenger: %v; want it refused by pair", got)
	}
	withStopping := func(d *Design) {
		measure(demoQ8, "lower", otherPair)(d)
		d.Stopping = &Stopping{Method: StopAnytime}
	}
	got = fidelityProblems(t, withStopping, "stopping")
	if !slices.ContainsFunc(got, func(p Problem) bool { return strings.Contains(p.Msg, "scored after all its trials") }) {
		t.Errorf("stopping beside fidelity ranking: %v; want it refused", got)
	}
}
