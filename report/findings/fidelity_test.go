package findings

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"rig/analysis"
	"rig/fidelity"
	"rig/internal/wording"
	"rig/receipts"
	"rig/report"
	"rig/studies"
)

// fakeFidelityTasks is the fake study's task count: the bundled quick
// study's, where a pass-rate difference is hard to show.
const fakeFidelityTasks = 24

// fakeFidelityRecords are made-up fidelity records, not a scorer's: per
// task, q4 and q2 scored on the same 20 tokens of the reference q8's output,
// q4 with a mean KL near 0.01 nats/token and q2 near 0.05 (q2 scored by
// model, as an Ollama arm would be), drawn from a fixed seed, and q8 held
// to itself (KL 0), as the runner keeps it.
func fakeFidelityRecords() []fidelity.StudyRecord {
	rng := rand.New(rand.NewPCG(7, 50))
	var out []fidelity.StudyRecord
	for i := range fakeFidelityTasks {
		task := fmt.Sprintf("t%02d", i)
		refTop := make([]int, 20)
		for j := range refTop {
			refTop[j] = rng.IntN(1000)
		}
		for _, arm := range []struct {
			name, by string
			kl       float64
			flip     float64
		}{{"q8", fidelity.ScoredByStack, 0, 0}, {"q4", fidelity.ScoredByStack, 0.01, 0.02}, {"q2", fidelity.ScoredByModel, 0.05, 0.10}} {
			rec := fidelity.StudyRecord{JobKind: "qa", Reference: "q8", Arm: arm.name, Task: task, RowID: "q8/qa/" + task + "/1#1", ScoredBy: arm.by}
			for _, top := range refTop {
				tok := fidelity.Token{KL: arm.kl * (0.5 + rng.Float64()), RefTop: top, ArmTop: top, RefLogprob: math.Log(0.6), ArmLogprob: math.Log(0.6 - arm.kl)}
				if rng.Float64() < arm.flip {
					tok.ArmTop = top + 1
				}
				rec.Tokens = append(rec.Tokens, tok)
			}
			out = append(out, rec)
		}
	}
	return out
}

// writeFakeFidelity writes the fake records as a study's fidelity.jsonl and
// reads them back through the contract's reader.
func writeFakeFidelity(t *testing.T, recs []fidelity.StudyRecord) []fidelity.StudyRecord {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), fidelity.StudyFile)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := fidelity.ReadStudy(path)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// fakeFidelityStudy is the evidence of a study of q4 and q2 against the
// incumbent q8, its job kind's reference: on every task all three pass
// alike but for a few, and guard (if any) is its one guardrail.
func fakeFidelityStudy(guard *studies.Guardrail) *Evidence {
	d := &studies.Design{
		Arms:         []studies.Arm{{Name: "q8", Role: studies.RoleIncumbent}, {Name: "q4", Role: studies.RoleCandidate}, {Name: "q2", Role: studies.RoleCandidate}},
		JobKinds:     []studies.JobKind{{Name: "qa", Reference: "q8", RankingMeasure: studies.Measure{Name: "pass_rate", Direction: "higher"}}},
		Pairs:        []studies.Pair{{Challenger: "q4", Incumbent: "q8"}, {Challenger: "q2", Incumbent: "q8"}, {Challenger: "q2", Incumbent: "q4"}},
		DecisionRule: studies.DecisionRule{Otherwise: "keep the incumbent"}}
	if guard != nil {
		d.Guardrails = []studies.Guardrail{*guard}
	}
	hash := strings.Repeat("ab", 32)
	ev := &Evidence{Study: "quant-fake", Execution: "x1", Snapshot: &studies.Snapshot{DesignHash: hash}, Design: d}
	for i := range fakeFidelityTasks {
		for _, arm := range []string{"q8", "q4", "q2"} {
			pass := i%4 != 0 || (arm == "q8" && i == 0)
			score := 0.0
			if pass {
				score = 1
			}
			ev.Receipts = append(ev.Receipts, receipts.Receipt{DesignHash: hash, Arm: arm, JobKind: "qa", TaskID: fmt.Sprintf("t%02d", i), Repeat: 1, Attempt: 1,
				Outcome: receipts.Scored, Grade: &receipts.Grade{Pass: pass, Score: score}, WallMS: 1000})
		}
	}
	return ev
}

// fakeFidelityReport computes the fake study's fidelity, analyses it and
// maps it onto the report.
func fakeFidelityReport(t *testing.T, ev *Evidence, recs []fidelity.StudyRecord) (analysis.Input, *analysis.Report, report.Data) {
	t.Helper()
	ctx := context.Background()
	if recs != nil {
		f, err := ComputeFidelity(ctx, recs, ev.Design, FidelityOptions(ev.Snapshot.DesignHash))
		if err != nil {
			t.Fatal(err)
		}
		ev.Fidelity = f
	}
	ai := Input(ev)
	rep, err := analysis.Analyse(ctx, ai)
	if err != nil {
		t.Fatal(err)
	}
	return ai, rep, ReportData(ev, ai, rep, Extras{GeneratedAt: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)})
}

// pageText is the page read as text, as the reviewer test reads it: tags
// out, entities decoded, a table row a line.
func pageText(page string) string {
	text := strings.NewReplacer("</tr>", "</tr>\n", "</p>", "</p>\n").Replace(page)
	return html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(text, " "))
}

func renderFidelity(t *testing.T, d report.Data) (md, js, page string) {
	t.Helper()
	var m, j, h bytes.Buffer
	if err := report.WriteMarkdown(&m, d); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&j, d); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteHTML(&h, d); err != nil {
		t.Fatal(err)
	}
	return m.String(), j.String(), h.String()
}

// TestFidelityFiguresFromRecords: each arm's figures are the fake records'
// own (the mean KL is the mean of the tasks' means), every interval holds
// its value, the pass rate stands beside, and q2's clearly larger KL than
// q4's gives a paired interval that excludes 0; against the reference q8
// the difference is the arm's own mean KL.
func TestFidelityFiguresFromRecords(t *testing.T) {
	recs := writeFakeFidelity(t, fakeFidelityRecords())
	_, rep, data := fakeFidelityReport(t, fakeFidelityStudy(nil), recs)
	f := data.Kinds[0].Fidelity
	if f == nil {
		t.Fatal("no fidelity section")
	}
	if f.Reference != "q8" || f.Seed != analysis.SeedForDesign(strings.Repeat("ab", 32)) || f.Level != 0.95 {
		t.Errorf("section %q seed %d level %v; want q8, the analysis seed, 0.95", f.Reference, f.Seed, f.Level)
	}
	if len(f.Arms) != 2 || f.Arms[0].Arm != "q4" || f.Arms[1].Arm != "q2" {
		t.Fatalf("arms %+v; want q4 then q2 (design order, the reference not measured)", f.Arms)
	}
	for _, a := range f.Arms {
		want := meanKL(fidelity.StudyUnits(recs, "qa", "", a.Arm))
		if math.Abs(a.MeanKL.Value-want) > 1e-12 || a.Tasks != fakeFidelityTasks || a.Tokens != 20*fakeFidelityTasks {
			t.Errorf("%s: mean KL %v over %d tasks, %d tokens; want %v over %d, %d", a.Arm, a.MeanKL.Value, a.Tasks, a.Tokens, want, fakeFidelityTasks, 20*fakeFidelityTasks)
		}
		for name, iv := range map[string]report.Interval{"mean KL": a.MeanKL, "p99 KL": a.P99KL, "top agreement": a.TopAgreement} {
			if !(iv.Low <= iv.Value && iv.Value <= iv.High && iv.Low < iv.High) || iv.Method == "" {
				t.Errorf("%s %s: %+v; want a method and an interval around the value", a.Arm, name, iv)
			}
		}
		if math.Abs(a.RefTokenProb-math.Exp(math.Log(0.6-map[string]float64{"q4": 0.01, "q2": 0.05}[a.Arm]))) > 1e-9 {
			t.Errorf("%s: P(reference's token) %v", a.Arm, a.RefTokenProb)
		}
		var pass float64 = -1
		for _, ar := range rep.Kinds[0].Arms {
			if ar.Arm == a.Arm {
				pass = float64(ar.PassRate)
			}
		}
		if a.PassRate == nil || *a.PassRate != pass {
			t.Errorf("%s: pass rate beside %v; want the analysis's %v", a.Arm, a.PassRate, pass)
		}
	}
	if f.Arms[0].ScoredBy != fidelity.ScoredByStack || f.Arms[1].ScoredBy != fidelity.ScoredByModel {
		t.Errorf("scored by %q, %q; want stack, model", f.Arms[0].ScoredBy, f.Arms[1].ScoredBy)
	}
	if len(f.Pairs) != 3 {
		t.Fatalf("pairs %+v; want q4 vs q8, q2 vs q8, q2 vs q4", f.Pairs)
	}
	q2q4 := f.Pairs[2]
	if q2q4.Challenger != "q2" || q2q4.Baseline != "q4" || !(q2q4.MeanKL.Low > 0) || !(q2q4.TopAgreement.High < 0) {
		t.Errorf("q2 vs q4: %+v; want a mean KL difference whose interval is above 0 and an agreement difference below 0", q2q4)
	}
	if d := q2q4.MeanKL.Value - (f.Arms[1].MeanKL.Value - f.Arms[0].MeanKL.Value); math.Abs(d) > 1e-12 {
		t.Errorf("paired mean KL difference off by %v from the arms' difference", d)
	}
	if q4q8 := f.Pairs[0]; math.Abs(q4q8.MeanKL.Value-f.Arms[0].MeanKL.Value) > 1e-12 || math.Abs(q4q8.P99KL.Value-f.Arms[0].P99KL.Value) > 1e-12 {
		t.Errorf("q4 vs the reference q8: %+v; want q4's own mean KL %v and p99 %v", q4q8, f.Arms[0].MeanKL.Value, f.Arms[0].P99KL.Value)
	}
	// Records that leave out the reference's own (KL 0 by definition) give
	// the same section: the reference is held to itself on the arm's tokens.
	noRef := slices.DeleteFunc(slices.Clone(recs), func(r fidelity.StudyRecord) bool { return r.Arm == "q8" })
	_, _, data2 := fakeFidelityReport(t, fakeFidelityStudy(nil), noRef)
	if !reflect.DeepEqual(data2.Kinds[0].Fidelity, f) {
		t.Errorf("without the reference's own records:\n%+v\nwant\n%+v", data2.Kinds[0].Fidelity, f)
	}
}

// TestFidelityWordsAndShape: every renderer says what the measure is and
// is not, labels the arm scored by model, shows the pass rates beside, and
// the JSON carries the section in the shape pinned here; the same records
// give byte-identical reports.
func TestFidelityWordsAndShape(t *testing.T) {
	recs := writeFakeFidelity(t, fakeFidelityRecords())
	_, _, data := fakeFidelityReport(t, fakeFidelityStudy(nil), recs)
	md, js, page := renderFidelity(t, data)
	for _, want := range []string{"Fidelity to q8", "It measures closeness to the reference model, not correctness", "Read it beside the pass rates",
		"q2 (" + report.ModelLabel + ")", "| pass rate |", "Against q8 itself the difference's estimate is the challenger's own figure"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if strings.Contains(md, "q4 ("+report.ModelLabel) {
		t.Error("q4, scored on its own stack, is labelled as the model's")
	}
	// Each arm's figures read the same on the page and in the Markdown, on
	// the arm's row, beside its pass rate.
	places := map[string]string{"markdown": md, "page": pageText(page)}
	for _, a := range data.Kinds[0].Fidelity.Arms {
		kl := fmt.Sprintf("%.4f [%.4f, %.4f] %s", a.MeanKL.Value, a.MeanKL.Low, a.MeanKL.High, a.MeanKL.Method)
		for place, text := range places {
			if row := lineWith(text, a.Arm, kl); row == "" || !strings.Contains(row, wording.Percent(*a.PassRate)) || !strings.Contains(row, wording.Percent(a.TopAgreement.Value)) {
				t.Errorf("%s: arm %s's row %q; want its mean KL %s, its agreement and its pass rate %s", place, a.Arm, row, kl, wording.Percent(*a.PassRate))
			}
		}
	}
	for _, pr := range data.Kinds[0].Fidelity.Pairs {
		kl := fmt.Sprintf("%+.4f [%+.4f, %+.4f]", pr.MeanKL.Value, pr.MeanKL.Low, pr.MeanKL.High)
		for place, text := range places {
			if lineWith(text, pr.Challenger+" vs "+pr.Baseline, kl) == "" {
				t.Errorf("%s: pair %s vs %s does not read %s", place, pr.Challenger, pr.Baseline, kl)
			}
		}
	}
	for _, want := range []string{"Fidelity to q8", "not correctness", "the model&#39;s fidelity, scored on its GGUF through the pinned llama.cpp; not the runtime&#39;s", `id="fidelity-qa"`} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	var got struct {
		Kinds []struct {
			Fidelity map[string]json.RawMessage `json:"fidelity"`
		} `json:"kinds"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatal(err)
	}
	keys := func(raw json.RawMessage) []string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	sec := got.Kinds[0].Fidelity
	if k := slices.Sorted(func(yield func(string) bool) {
		for k := range sec {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(k, []string{"arms", "level", "pairs", "reference", "seed"}) {
		t.Errorf("kinds[0].fidelity keys %v", k)
	}
	var arms, pairs []json.RawMessage
	if json.Unmarshal(sec["arms"], &arms) != nil || json.Unmarshal(sec["pairs"], &pairs) != nil || len(arms) != 2 || len(pairs) != 3 {
		t.Fatalf("arms %s pairs %s", sec["arms"], sec["pairs"])
	}
	if k := keys(arms[0]); !slices.Equal(k, []string{"arm", "mean_kl", "p99_kl", "pass_rate", "ref_token_prob", "scored_by", "tasks", "tokens", "top_agreement"}) {
		t.Errorf("kinds[0].fidelity.arms[0] keys %v", k)
	}
	if k := keys(pairs[0]); !slices.Equal(k, []string{"baseline", "challenger", "mean_kl", "p99_kl", "top_agreement"}) {
		t.Errorf("kinds[0].fidelity.pairs[0] keys %v", k)
	}
	var a0 map[string]json.RawMessage
	_ = json.Unmarshal(arms[0], &a0)
	if k := keys(a0["mean_kl"]); !slices.Equal(k, []string{"high", "low", "method", "value"}) {
		t.Errorf("mean_kl keys %v", k)
	}
	// Reproducible: the same records and design give the same bytes.
	_, _, again := fakeFidelityReport(t, fakeFidelityStudy(nil), recs)
	md2, js2, page2 := renderFidelity(t, again)
	if md2 != md || js2 != js || page2 != page {
		t.Error("the same inputs gave a different report")
	}
}

// TestFidelityGuardrailBothWays: a fidelity_kl guardrail of at most 0.02
// nats/token more than the incumbent holds for q4 (about 0.01, its whole
// interval under the limit) and blocks q2 (about 0.05); with no records it
// blocks, since it cannot be read.
func TestFidelityGuardrailBothWays(t *testing.T) {
	limit := 0.02
	g := &studies.Guardrail{Metric: studies.MetricFidelityKL, MaxAbsoluteIncrease: &limit}
	recs := writeFakeFidelity(t, fakeFidelityRecords())
	_, rep, data := fakeFidelityReport(t, fakeFidelityStudy(g), recs)
	verdict := map[string]analysis.Constraint{}
	for _, c := range rep.Constraints {
		if c.Metric == analysis.MetricFidelityKL && c.Baseline == "q8" {
			verdict[c.Candidate] = c
		}
	}
	if c := verdict["q4"]; c.Blocks || !strings.Contains(c.Reading, "upper bound within the limit of 0.02") {
		t.Errorf("q4 vs q8: %+v; want it to hold, its upper bound within 0.02", c)
	}
	if c := verdict["q2"]; !c.Blocks || !strings.Contains(c.Reading, "upper bound over the limit of 0.02") {
		t.Errorf("q2 vs q8: %+v; want it to block", c)
	}
	md, _, page := renderFidelity(t, data)
	for place, text := range map[string]string{"markdown": strings.ReplaceAll(md, `\|`, "|"), "page": pageText(page)} {
		for _, gc := range rep.Constraints {
			verdict := map[bool]string{true: "blocks", false: "holds"}[gc.Blocks]
			if lineWith(text, gc.Reading, gc.Limit, verdict) == "" {
				t.Errorf("%s: no line reads guardrail %s on %s vs %s as %q, limit %s, %s", place, gc.Clause, gc.Candidate, gc.Baseline, gc.Reading, gc.Limit, verdict)
			}
		}
	}
	_, rep, _ = fakeFidelityReport(t, fakeFidelityStudy(g), nil)
	for _, c := range rep.Constraints {
		if c.Metric == analysis.MetricFidelityKL && (!c.Blocks || !strings.Contains(c.Reading, "not measured")) {
			t.Errorf("%s vs %s without records: %+v; want it to block as not measured", c.Candidate, c.Baseline, c)
		}
	}
}

// TestNoFidelityRecordsRendersAsBefore: a study that kept no fidelity
// records reports exactly as with an empty computation, nothing of the
// section shows, and its comparison hash is the one without the field.
func TestNoFidelityRecordsRendersAsBefore(t *testing.T) {
	ai, rep, data := fakeFidelityReport(t, fakeFidelityStudy(nil), nil)
	md, js, page := renderFidelity(t, data)
	for _, s := range []string{md, js, page} {
		if strings.Contains(strings.ToLower(s), "fidelity") {
			t.Error("a study without fidelity records mentions fidelity")
		}
	}
	ev := fakeFidelityStudy(nil)
	ev.Fidelity = &Fidelity{}
	_, _, empty := fakeFidelityReport(t, ev, nil)
	md2, js2, page2 := renderFidelity(t, empty)
	if md2 != md || js2 != js || page2 != page {
		t.Error("an empty fidelity computation changed the report")
	}
	if ai.Fidelity != nil {
		t.Errorf("analysis input carries fidelity %v without records", ai.Fidelity)
	}
	withField, err := analysis.ComparisonHash(analysis.Input{Design: ai.Design, Trials: ai.Trials, Fidelity: []analysis.FidelityKL{{JobKind: "qa"}}})
	if err != nil || withField == rep.ComparisonHash {
		t.Errorf("fidelity figures do not enter the comparison hash (%v)", err)
	}
}

// TestFidelityInTheCardTable: in a card sub-study, each cell scored gets
// its mean KL in the card table's fidelity column, and a cell not scored
// shows none.
func TestFidelityInTheCardTable(t *testing.T) {
	small, big := studies.CardProfile{Name: "small", Simulated: true}, studies.CardProfile{Name: "big", Simulated: true}
	d := &studies.Design{Kind: studies.KindCard,
		Arms: []studies.Arm{{Name: "q8@big", BaseArm: "q8", Card: &big, Role: studies.RoleIncumbent}, {Name: "q8@small", BaseArm: "q8", Card: &small, Role: studies.RoleCandidate},
			{Name: "q4@big", BaseArm: "q4", Card: &big, Role: studies.RoleCandidate}, {Name: "q4@small", BaseArm: "q4", Card: &small, Role: studies.RoleCandidate}},
		JobKinds: []studies.JobKind{{Name: "qa", Reference: "q8", RankingMeasure: studies.Measure{Name: "pass_rate"}}}}
	var recs []fidelity.StudyRecord
	for _, r := range fakeFidelityRecords() {
		if r.Arm == "q4" || r.Arm == "q8" {
			r.Arm, r.Reference, r.Profile = r.Arm+"@small", "q8@small", "small"
			recs = append(recs, r)
		}
	}
	f, err := ComputeFidelity(context.Background(), recs, d, FidelityOptions("h"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Kinds["qa"]; got == nil || got.Reference != "q8" || len(got.Arms) != 1 || got.Arms[0].Profile != "small" {
		t.Fatalf("card section %+v; want q4@small at profile small, held to q8", got)
	}
	if iv, ref := f.cardFidelity("qa", d.Arms[3]); iv == nil || ref || *iv != f.Kinds["qa"].Arms[0].MeanKL {
		t.Errorf("q4@small's card cell %v (reference %v); want its mean KL", iv, ref)
	}
	if iv, ref := f.cardFidelity("qa", d.Arms[2]); iv != nil || ref {
		t.Errorf("q4@big, not scored, shows %v (reference %v)", iv, ref)
	}
	if iv, ref := f.cardFidelity("qa", d.Arms[1]); iv != nil || !ref {
		t.Errorf("q8@small, the reference at its profile, shows %v (reference %v); want it marked the reference", iv, ref)
	}
	var md bytes.Buffer
	q4small, _ := f.cardFidelity("qa", d.Arms[3])
	cards := &report.Cards{Rows: []report.CardRow{{Model: "q4", Profile: "small", JobKind: "qa", Fits: true, Fidelity: q4small}, {Model: "q4", Profile: "big", JobKind: "qa", Fits: true},
		{Model: "q8", Profile: "small", JobKind: "qa", Fits: true, FidelityReference: true}}}
	if err := report.WriteMarkdown(&md, report.Data{Study: "s", Cards: cards}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "fidelity: mean KL [interval]") || strings.Count(md.String(), " — |\n") < 1 || !strings.Contains(md.String(), " | reference |\n") {
		t.Errorf("card table without its fidelity column or a missing cell:\n%s", md.String())
	}
}

// TestFidelityRecordsThatDisagreeAreRefused: a job kind's records against
// two references at one profile are refused, naming the file.
func TestFidelityRecordsThatDisagreeAreRefused(t *testing.T) {
	recs := fakeFidelityRecords()
	recs[1].Reference = "q4"
	_, err := ComputeFidelity(context.Background(), recs, fakeFidelityStudy(nil).Design, FidelityOptions("h"))
	if err == nil || !strings.Contains(err.Error(), fidelity.StudyFile) || !strings.Contains(err.Error(), "one reference arm") {
		t.Errorf("err %v; want a refusal naming %s", err, fidelity.StudyFile)
	}
}

// TestFidelitySectionValidated: a fidelity pair naming an arm without a
// row, or a number that is not one, is refused before a byte is written.
func TestFidelitySectionValidated(t *testing.T) {
	_, _, data := fakeFidelityReport(t, fakeFidelityStudy(nil), fakeFidelityRecords())
	f := *data.Kinds[0].Fidelity
	f.Pairs = append(slices.Clone(f.Pairs), report.FidelityPair{Challenger: "q3", Baseline: "q8"})
	f.Arms = slices.Clone(f.Arms)
	f.Arms[0].MeanKL.High = math.NaN()
	data.Kinds[0].Fidelity = &f
	err := data.Validate()
	for _, want := range []string{"kinds[0].fidelity.pairs[3].challenger", "kinds[0].fidelity.arms[0].mean_kl.high"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v; want %s refused", err, want)
		}
	}
}

// TestFidelityPairOnOtherTasksIsNoted: when q2 lacks a task q4 has, q2 vs
// q4 is not paired on fewer tasks; the section says why, and q2 vs its
// reference still pairs on q2's own tasks (the reference's KL from itself
// is 0 on every task).
func TestFidelityPairOnOtherTasksIsNoted(t *testing.T) {
	recs := slices.DeleteFunc(fakeFidelityRecords(), func(r fidelity.StudyRecord) bool { return r.Arm == "q2" && r.Task == "t03" })
	_, _, data := fakeFidelityReport(t, fakeFidelityStudy(nil), recs)
	f := data.Kinds[0].Fidelity
	if len(f.Pairs) != 2 || f.Pairs[1].Challenger != "q2" || f.Pairs[1].Baseline != "q8" {
		t.Errorf("pairs %+v; want q4 vs q8 and q2 vs q8 only", f.Pairs)
	}
	if len(f.Notes) != 1 || !strings.HasPrefix(f.Notes[0], "q2 vs q4 is not paired: ") {
		t.Errorf("notes %q; want one saying q2 vs q4 is not paired, and why", f.Notes)
	}
	md, _, _ := renderFidelity(t, data)
	if !strings.Contains(md, "- q2 vs q4 is not paired") {
		t.Error("the note is not in the Markdown")
	}
}

// fakeFidelityRankedStudy is the fake study with its job kind ranked by
// fidelity to q8: incumbent and challenger are the other two arms, the
// only pair is challenger against incumbent, and a challenger shown better
// is accepted.
func fakeFidelityRankedStudy(incumbent, challenger string) *Evidence {
	ev := fakeFidelityStudy(nil)
	d := ev.Design
	d.JobKinds[0].RankingMeasure = studies.Measure{Name: studies.FidelityRankingMeasure, Direction: "lower"}
	for i := range d.Arms {
		d.Arms[i].Role = studies.RoleCandidate
		if d.Arms[i].Name == incumbent {
			d.Arms[i].Role = studies.RoleIncumbent
		}
	}
	d.Pairs = []studies.Pair{{Challenger: challenger, Incumbent: incumbent}}
	d.DecisionRule = studies.DecisionRule{Clauses: []studies.Clause{{When: studies.WhenChallengerBetter, Assign: "accept challenger"}}, Otherwise: "keep the incumbent"}
	return ev
}

// TestFidelityRanksTheJobKind: ranked by fidelity to q8, q4 (mean KL near
// 0.01) is accepted over q2 (near 0.05) on the paired KL interval though
// their pass rates are alike, q2 over q4 is kept out, and the ranking line
// says it ranks by mean KL to the reference, closeness not correctness,
// with the pass rates beside.
func TestFidelityRanksTheJobKind(t *testing.T) {
	recs := writeFakeFidelity(t, fakeFidelityRecords())
	_, rep, data := fakeFidelityReport(t, fakeFidelityRankedStudy("q2", "q4"), recs)
	if len(rep.Pairs) != 1 || rep.Pairs[0].Outcome != analysis.Improvement || !(float64(rep.Pairs[0].Interval.Hi) < 0) {
		t.Fatalf("pairs %+v; want q4 vs q2 an improvement, its KL interval below 0", rep.Pairs)
	}
	if rep.Decision.Verdict != analysis.Accept || rep.Decision.Arm != "q4" {
		t.Errorf("decision %s %s; want q4 accepted:\n%s", rep.Decision.Verdict, rep.Decision.Arm, strings.Join(rep.Decision.Trace, "\n"))
	}
	if pr := data.Kinds[0].Pairs[0].Delta; pr.Value != float64(rep.Pairs[0].Delta) || pr.High >= 0 {
		t.Errorf("report pair delta %+v; want the KL difference, below 0", pr)
	}
	md, _, page := renderFidelity(t, data)
	want := "Ranking measure **mean KL per token to q8, nats (closeness to the reference model, not correctness)** (lower is better; pass rates shown beside)"
	if !strings.Contains(md, want) {
		t.Errorf("markdown has no ranking line %q", want)
	}
	if !strings.Contains(pageText(page), "Ranking measure  mean KL per token to q8, nats (closeness to the reference model, not correctness)  (lower is better; pass rates shown beside)") {
		t.Error("page has no fidelity ranking line")
	}
	if !strings.Contains(md, "pass rate") {
		t.Error("pass rates are not shown beside")
	}
	// P(best) is the pass rate's: the headline says so, in both forms, so it
	// is not read against the pairs, which rank by mean KL.
	if data.Kinds[0].Leader == "" {
		t.Fatal("the fake study has no leader, so its headline is not the one under test")
	}
	const by = "By pass rate (the pairs and the decision rank by mean KL per token to q8"
	if !strings.Contains(md, by) || !strings.Contains(pageText(page), by) {
		t.Errorf("the headline does not say its P(best) is by pass rate (%q)", by)
	}

	_, rep, _ = fakeFidelityReport(t, fakeFidelityRankedStudy("q4", "q2"), recs)
	if len(rep.Pairs) != 1 || rep.Pairs[0].Outcome != analysis.Regression || rep.Decision.Verdict != analysis.Keep {
		t.Errorf("q2 vs q4: pairs %+v, verdict %s; want a regression and the incumbent kept", rep.Pairs, rep.Decision.Verdict)
	}
}

// TestFidelityRankingWithoutRecordsReports: ranked by fidelity with no
// records, the pair is inconclusive, says it was not measured, and the
// report stays valid, its difference said to be the pass rates'.
func TestFidelityRankingWithoutRecordsReports(t *testing.T) {
	_, rep, data := fakeFidelityReport(t, fakeFidelityRankedStudy("q2", "q4"), nil)
	if len(rep.Pairs) != 1 || rep.Pairs[0].Outcome != analysis.Inconclusive || rep.Decision.Verdict != analysis.Keep {
		t.Fatalf("pairs %+v, verdict %s; want inconclusive and the incumbent kept", rep.Pairs, rep.Decision.Verdict)
	}
	if pr := data.Kinds[0].Pairs[0]; !strings.Contains(pr.Test, "fidelity not measured") || !strings.Contains(pr.Test, "pass rates'") {
		t.Errorf("pair test %q; want it to say fidelity was not measured and the figures are the pass rates'", pr.Test)
	}
	if md, _, _ := renderFidelity(t, data); !strings.Contains(md, "mean KL per token to q8") {
		t.Error("the ranking line does not say it ranks by mean KL to q8")
	}
}
