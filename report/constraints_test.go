package report

import (
	"bytes"
	"encoding/json"
	"html"
	"strings"
	"testing"
)

// withDecisionRules is the sample report with latency, the sample-ratio
// check and a blocking guardrail filled in.
func withDecisionRules() Data {
	d := SampleData()
	p50, p95, d50, d95 := 1200.0, 2500.0, 300.0, -40.0
	chi, p := 25.7, 3.96e-7
	k := &d.Kinds[0]
	k.Latency = []Latency{{Arm: k.Arms[0].Arm, Trials: 40, P50MS: &p50, P95MS: &p95}, {Arm: k.Arms[1].Arm, Trials: 38, P50MS: &p50, P95MS: &p95, DeltaP50MS: &d50, DeltaP95MS: &d95}}
	k.SRM = &SRM{Arms: []string{k.Arms[0].Arm, k.Arms[1].Arm}, Planned: []int{300, 300}, Scored: []int{300, 150}, ChiSq: &chi, DF: 1, P: &p, Alpha: 0.001, Mismatch: true}
	d.Decision.Constraints = []Constraint{{Clause: "guardrails[0]", Metric: "p95_latency", JobKind: k.Name, Challenger: k.Arms[1].Arm, Baseline: k.Arms[0].Arm,
		Limit: "at most +10.0% worse", Reading: "2500 vs 2000, 25.0% slower, over the limit of 10.0%", Blocks: true}}
	return d
}

func TestDecisionRuleNumbersInEveryFormat(t *testing.T) {
	d := withDecisionRules()
	want := []string{"guardrails[0]", "25.0% slower, over the limit of 10.0%", "blocks", "2.50 s", "+300 ms", "-40 ms", "SAMPLE-RATIO MISMATCH", "p = 3.96e-07", "300 of 300", "150 of 300"}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	raw := renderPage(t, d)
	page := html.UnescapeString(raw) // html/template writes + as &#43;
	for _, w := range want {
		if !strings.Contains(md.String(), w) {
			t.Errorf("Markdown lacks %q", w)
		}
		if !strings.Contains(page, w) {
			t.Errorf("HTML lacks %q", w)
		}
	}
	// The page's one script is its own, inline and pinned by hash: the
	// decision's numbers are in the markup without it.
	if n := strings.Count(raw, "<script"); n > 2 || strings.Contains(raw, "<script src") {
		t.Errorf("the HTML holds %d script elements (want the page's own data block and script)", n)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	var back Data
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if s := back.Kinds[0].SRM; s == nil || !s.Mismatch || *s.P != 3.96e-7 || s.Scored[1] != 150 {
		t.Errorf("JSON SRM = %+v", s)
	}
	if c := back.Decision.Constraints; len(c) != 1 || !c[0].Blocks || c[0].Clause != "guardrails[0]" {
		t.Errorf("JSON constraints = %+v", c)
	}
	if l := back.Kinds[0].Latency; len(l) != 2 || l[0].DeltaP95MS != nil || *l[1].DeltaP95MS != -40 {
		t.Errorf("JSON latency = %+v", l)
	}
}

func TestSRMAndLatencyNameKnownArms(t *testing.T) {
	d := withDecisionRules()
	d.Kinds[0].Latency[0].Arm = "ghost"
	d.Kinds[0].SRM.Scored = d.Kinds[0].SRM.Scored[:1]
	err := d.Validate()
	if err == nil || !strings.Contains(err.Error(), "kinds[0].latency[0].arm") || !strings.Contains(err.Error(), "kinds[0].srm: 2 arms, 2 planned and 1 scored") {
		t.Errorf("Validate = %v, want the latency arm and the SRM counts named", err)
	}
}
