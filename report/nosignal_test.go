package report

import (
	"bytes"
	"strings"
	"testing"
)

// noSignalData is the sample with its first job kind measured nothing: the
// analysis said "no signal" and named no leader; every interval names its
// method.
func noSignalData() Data {
	d := SampleData()
	k := &d.Kinds[0]
	k.Verdict, k.Leader = "no signal", ""
	k.Interval = "95%; wilson-blaker: Wilson score interval joined with Blaker's exact interval at the coverage floor; tango-edges: Tango score interval for paired proportions, widened on the table's edges to the coverage floor"
	for i := range k.Arms {
		k.Arms[i].Score = Interval{Value: 0, Low: 0, High: 0.1135, Method: "wilson-blaker"}
		k.Arms[i].Tie = false
	}
	for i := range k.Pairs {
		k.Pairs[i].Delta = Interval{Value: 0, Low: -0.1135, High: 0.1135, Method: "tango-edges"}
	}
	return d
}

// TestNoSignalAndMethodsInEveryFormat: a job kind with no signal reads as
// "No signal", not as a leader or a tie, in HTML and Markdown; the method
// is printed beside each interval in both, and carried in the JSON.
func TestNoSignalAndMethodsInEveryFormat(t *testing.T) {
	d := noSignalData()
	var h, m, j bytes.Buffer
	if err := WriteHTML(&h, d); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&m, d); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&j, d); err != nil {
		t.Fatal(err)
	}
	kind := func(s, heading string) string {
		// The first job kind's section: up to the second one's heading.
		start := strings.Index(s, heading+d.Kinds[0].Name)
		end := strings.Index(s, heading+d.Kinds[1].Name)
		if start < 0 || end < start {
			t.Fatalf("job kind sections not found")
		}
		return s[start:end]
	}
	for name, out := range map[string][2]string{"html": {h.String(), "<h3>Job kind: "}, "markdown": {m.String(), "## Job kind: "}} {
		sec := kind(out[0], out[1])
		if !strings.Contains(sec, "No signal. Every arm scored the same on every task") {
			t.Errorf("%s: no-signal headline missing", name)
		}
		if strings.Contains(sec, "ranks first") || strings.Contains(sec, "leads with") {
			t.Errorf("%s: a job kind with no signal names a leader", name)
		}
		// The pairs table may sit in another section of the page.
		if !strings.Contains(sec, "0.000 [0.000, 0.114] wilson-blaker") || !strings.Contains(out[0], "0.114] tango-edges") {
			t.Errorf("%s: the method is not printed beside each interval", name)
		}
	}
	for _, want := range []string{`"method": "wilson-blaker"`, `"method": "tango-edges"`, `"verdict": "no signal"`} {
		if !strings.Contains(j.String(), want) {
			t.Errorf("json lacks %s", want)
		}
	}
}

// TestExactTieHeadlineNamesNoLeader: a tie with no leader (the top shared
// exactly) says so and names the tied arms, not one of them as leading.
func TestExactTieHeadlineNamesNoLeader(t *testing.T) {
	d := SampleData()
	k := &d.Kinds[0]
	k.Verdict, k.Leader = "tie", ""
	for i := range k.Arms {
		k.Arms[i].PBest = 1 / float64(len(k.Arms))
		k.Arms[i].Tie = true
	}
	var h bytes.Buffer
	if err := WriteHTML(&h, d); err != nil {
		t.Fatal(err)
	}
	sec, _, _ := strings.Cut(h.String(), "Job kind: "+d.Kinds[1].Name)
	if !strings.Contains(sec, "No single best arm. The top of the ranking is shared exactly ("+k.Arms[0].Arm) {
		t.Error("exact-tie headline missing")
	}
	if strings.Contains(sec, "leads with P(best)") {
		t.Error("an exact tie names a leader")
	}
}
