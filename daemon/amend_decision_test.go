package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"rig/api"
	"rig/internal/atomicfile"
	"rig/report"
	"rig/studies"
)

// An amendment is appended, never written over the decision: decision.json
// keeps its bytes, the amendments keep their order, each names the decision
// it amends, and the lifecycle's audit and the store's audit log hold the
// decision and every amendment. A preview appends nothing.
func TestAmendDecisionAppendsAndKeepsTheDecision(t *testing.T) {
	f := newDecideFixture(t)
	ctx := context.Background()
	rec, err := f.decide(DecideRequest{Rationale: "gemma is fastre", Actor: "dana"})
	if err != nil {
		t.Fatal(err)
	}
	file := studyDir(t, f.s, "s1").Decision()
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rp := f.s.Reports()
	preview, err := rp.AmendDecision(ctx, AmendDecisionRequest{Study: "s1", Rationale: "a preview", Actor: "dana", Preview: true})
	if err != nil || !preview.Preview || preview.Seq != 1 {
		t.Fatalf("preview = %+v, %v; want amendment 1, marked a preview", preview, err)
	}
	if l, _ := f.s.lifecycle("s1"); len(l.Amendments) != 0 {
		t.Fatalf("a preview appended %+v", l.Amendments)
	}
	why := []string{"typo: gemma is faster at the same pass rate", "and the p95 holds under the SLO"}
	who := []string{"dana", "dora"}
	for i := range why {
		a, err := rp.AmendDecision(ctx, AmendDecisionRequest{Study: "s1", Rationale: why[i], Actor: who[i]})
		if err != nil {
			t.Fatal(err)
		}
		if a.Preview || a.Seq != i+1 || a.Study != "s1" || a.Rationale != why[i] || a.Actor != who[i] || a.Execution != rec.Execution || !a.DecidedAt.Equal(rec.At) || a.At.Before(rec.At) {
			t.Errorf("amendment %d = %+v; want %q by %s, naming the decision of %s at %s", i+1, a, why[i], who[i], rec.Execution, rec.At)
		}
	}
	after, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("decision.json changed (%v):\nbefore %s\nafter  %s", err, before, after)
	}
	if got, err := rp.decision("s1"); err != nil || got.Rationale != "gemma is fastre" || got.Actor != "dana" {
		t.Errorf("the decision read back %+v, %v; want dana's first rationale", got, err)
	}
	l, err := f.s.lifecycle("s1")
	if err != nil {
		t.Fatal(err)
	}
	if l.State != studies.Decided || l.Outcome != f.action || len(l.Amendments) != 2 || l.Amendments[0].Rationale != why[0] || l.Amendments[1].Rationale != why[1] {
		t.Errorf("lifecycle %s, outcome %q, amendments %+v; want decided, %q, the two in order", l.State, l.Outcome, l.Amendments, f.action)
	}
	var events []string
	for _, e := range l.Audit[len(l.Audit)-3:] {
		events = append(events, e.Event+" by "+e.Actor+": "+e.Why)
	}
	want := []string{"decide by dana: gemma is fastre", "amend-decision by dana: " + why[0], "amend-decision by dora: " + why[1]}
	if strings.Join(events, "\n") != strings.Join(want, "\n") {
		t.Errorf("the lifecycle's audit ends\n%s\nwant\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
	}
	st, err := f.s.store("s1")
	if err != nil {
		t.Fatal(err)
	}
	trail, err := st.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, tr := range trail[len(trail)-3:] {
		stored = append(stored, tr.From+"→"+tr.To+" by "+tr.Who+": "+tr.Why)
	}
	wantStored := []string{"frozen→decided by dana: gemma is fastre", "decided→decided by dana: " + why[0], "decided→decided by dora: " + why[1]}
	if strings.Join(stored, "\n") != strings.Join(wantStored, "\n") {
		t.Errorf("the store's audit log ends\n%s\nwant\n%s", strings.Join(stored, "\n"), strings.Join(wantStored, "\n"))
	}
	if sum, err := st.Check(ctx); err != nil {
		t.Errorf("the store's check after the amendments: %+v, %v", sum, err)
	}
}

// Nothing to amend before a decision; an amendment needs its rationale;
// under a policy it is refused to the study's registrant and reviewer as
// deciding is. Each refusal appends nothing.
func TestAmendDecisionRefusals(t *testing.T) {
	f := newDecideFixture(t)
	rp := f.s.Reports()
	ctx := context.Background()
	for _, preview := range []bool{true, false} {
		_, err := rp.AmendDecision(ctx, AmendDecisionRequest{Study: "s1", Rationale: "too early", Actor: "dana", Preview: preview})
		if !errors.Is(err, studies.ErrTransition) || codeOf(err) != "transition_refused" {
			t.Fatalf("amend before a decision (preview %v) = %v (code %q), want a refused transition", preview, err, codeOf(err))
		}
		for _, want := range []string{`study "s1" has no recorded decision`, "rig study decide s1"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal %q does not say %q", err, want)
			}
		}
	}
	if _, err := f.decide(DecideRequest{Rationale: "the rule says ship", Actor: "dana"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.AmendDecision(ctx, AmendDecisionRequest{Study: "s1", Rationale: "  ", Actor: "dana"}); !errors.Is(err, studies.ErrTransition) || !strings.Contains(err.Error(), "--rationale") {
		t.Errorf("amend with no rationale = %v, want a refusal naming --rationale", err)
	}
	f.s.Access().SetPolicy(testPolicy(t))
	for _, who := range []string{"alice", "rita"} { // the registrant, the reviewer
		_, err := rp.AmendDecision(as(who, 3000), AmendDecisionRequest{Study: "s1", Rationale: "mine"})
		if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "amend the decision on it") {
			t.Errorf("%s amends = %v; want ErrForbidden under separation of duties", who, err)
		}
	}
	if a, err := rp.AmendDecision(as("dora", 1002), AmendDecisionRequest{Study: "s1", Rationale: "a Director with no part"}); err != nil || a.Actor != "dora (uid 1002)" || a.ActorUID == nil || *a.ActorUID != 1002 {
		t.Errorf("dora amends = %+v, %v; want it recorded under dora's uid", a, err)
	}
	if l, _ := f.s.lifecycle("s1"); len(l.Amendments) != 1 {
		t.Errorf("amendments %+v; want only dora's", l.Amendments)
	}
}

// The report shows the decision as recorded and each amendment after it,
// labelled, with its actor, time and rationale: in the HTML, the Markdown
// and the JSON.
func TestReportShowsTheAmendments(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	rp := c.svc.Reports()
	a, err := rp.Analyse(ctx, c.name, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rp.Decide(ctx, DecideRequest{Study: c.name, ComparisonHash: a.Report.ComparisonHash, Rationale: "the rule decided; smollm2 fits", Actor: "dana"}); err != nil {
		t.Fatal(err)
	}
	why := []string{"correction: the q8 cell does not fit at 1 GiB", "second note <b>kept as text</b>"}
	for i, w := range why {
		if _, err := rp.AmendDecision(ctx, AmendDecisionRequest{Study: c.name, Rationale: w, Actor: []string{"dana", "dora"}[i]}); err != nil {
			t.Fatal(err)
		}
	}
	files, err := rp.Report(ctx, c.name, ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var data report.Data
	if err := atomicfile.ReadJSON(files.JSON, &data); err != nil {
		t.Fatal(err)
	}
	if d := data.Decision; d == nil || d.Rationale != "the rule decided; smollm2 fits" || len(d.Amendments) != 2 ||
		d.Amendments[0].Seq != 1 || d.Amendments[0].Actor != "dana" || d.Amendments[0].Rationale != why[0] || d.Amendments[0].At.IsZero() ||
		d.Amendments[1].Seq != 2 || d.Amendments[1].Actor != "dora" || d.Amendments[1].Rationale != why[1] {
		t.Errorf("report.json's decision %+v; want the first rationale and the two amendments in order", d)
	}
	raw, err := os.ReadFile(files.JSON)
	if err != nil || !strings.Contains(string(raw), `"amendments"`) {
		t.Errorf("report.json has no amendments member (%v)", err)
	}
	md, err := os.ReadFile(files.Markdown)
	if err != nil {
		t.Fatal(err)
	}
	first, one, two := strings.Index(string(md), "the rule decided; smollm2 fits"), strings.Index(string(md), "**Amendment 1**, by dana at "), strings.Index(string(md), "**Amendment 2**, by dora at ")
	if first < 0 || one < first || two < one || !strings.Contains(string(md), why[0]) {
		t.Errorf("report.md: the decision at %d, amendment 1 at %d, 2 at %d; want them in that order:\n%s", first, one, two, md)
	}
	page, err := os.ReadFile(files.HTML)
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{`id="amendment-1"><b>Amendment 1</b> by <b>dana</b> at `, `id="amendment-2"><b>Amendment 2</b> by <b>dora</b>`, why[0], "second note &lt;b&gt;kept as text&lt;/b&gt;"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html does not show %q", want)
		}
	}
	if strings.Index(html, "the rule decided; smollm2 fits") > strings.Index(html, `id="amendment-1"`) {
		t.Error("report.html shows an amendment before the decision")
	}
}

// Over the socket, with the typed client: a decide preview and an amendment
// reach their methods and come back as the api's types; a study with no
// decision is refused with the transition code.
func TestAmendDecisionOverTheSocket(t *testing.T) {
	f := newDecideFixture(t)
	methods := f.s.methods()
	// The fixture's analysis stands in for the real one, as f.decide does.
	methods[api.MethodDecide] = method(func(ctx context.Context, r api.DecideRequest, _ io.Writer) (any, error) {
		return f.s.Reports().decide(ctx, r, f.analyse)
	})
	c := serveOn(t, f.s, methods)
	ctx := context.Background()
	if _, err := c.AmendDecision(ctx, api.AmendDecisionRequest{Study: "s1", Rationale: "too early"}); !errors.Is(err, api.ErrTransition) {
		t.Errorf("amend before a decision = %v, want api.ErrTransition", err)
	}
	p, err := c.Decide(ctx, api.DecideRequest{Study: "s1", ComparisonHash: f.hash, Rationale: "ship it", Preview: true})
	if err != nil || !p.Preview || p.Action != f.action {
		t.Fatalf("decide preview = %+v, %v", p, err)
	}
	if _, err := c.Decide(ctx, api.DecideRequest{Study: "s1", ComparisonHash: f.hash, Rationale: "ship it"}); err != nil {
		t.Fatal(err)
	}
	a, err := c.AmendDecision(ctx, api.AmendDecisionRequest{Study: "s1", Rationale: "ship it, gemma being faster"})
	if err != nil || a.Seq != 1 || a.Rationale != "ship it, gemma being faster" || a.Execution != f.exec || a.Actor == "" {
		t.Errorf("amend = %+v, %v", a, err)
	}
}
