package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fakeFidelity is a made-up fidelity section on the sample's first job
// kind: its first arm held to its second, scored by model.
func fakeFidelity(k Kind) *Fidelity {
	pr := k.Arms[0].PassRate
	iv := func(v, lo, hi float64, m string) Interval { return Interval{Value: v, Low: lo, High: hi, Method: m} }
	return &Fidelity{Reference: k.Arms[1].Arm, Level: 0.95, Seed: 7,
		Arms: []FidelityArm{{Arm: k.Arms[0].Arm, ScoredBy: ScoredByModel, Tasks: 24, Tokens: 1900,
			MeanKL: iv(0.0123, 0.0101, 0.0150, "bca"), P99KL: iv(0.091, 0.080, 0.104, "percentile"), TopAgreement: iv(0.962, 0.950, 0.973, "bca"),
			RefTokenProb: 0.58, PassRate: &pr}},
		Pairs: []FidelityPair{{Challenger: k.Arms[0].Arm, Baseline: k.Arms[1].Arm,
			MeanKL: iv(0.0123, 0.0101, 0.0150, "bca"), P99KL: iv(0.091, 0.080, 0.104, "percentile"), TopAgreement: iv(-0.038, -0.050, -0.027, "bca")}}}
}

// TestFidelityRoundTripsAndRenders: the section survives report.json
// unchanged, its figures print with four decimals and their methods, and a
// sample without it shows no fidelity anywhere, the card table included.
func TestFidelityRoundTripsAndRenders(t *testing.T) {
	plain := SampleData()
	var md, page bytes.Buffer
	if err := WriteMarkdown(&md, plain); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, plain); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "idelity") || strings.Contains(page.String(), "idelity") {
		t.Error("a report without fidelity figures mentions fidelity")
	}

	d := SampleData()
	d.Kinds[0].Fidelity = fakeFidelity(d.Kinds[0])
	kl := 0.0123
	d.Cards.Rows[0].Fidelity = &Interval{Value: kl, Low: 0.0101, High: 0.0150, Method: "bca"}
	var js bytes.Buffer
	if err := WriteJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	var back Data
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Kinds[0].Fidelity, d.Kinds[0].Fidelity) || !reflect.DeepEqual(back.Cards.Rows[0].Fidelity, d.Cards.Rows[0].Fidelity) {
		t.Errorf("fidelity changed in the JSON round trip:\n got %+v\nwant %+v", back.Kinds[0].Fidelity, d.Kinds[0].Fidelity)
	}
	md.Reset()
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Fidelity to " + d.Kinds[0].Arms[1].Arm, "0.0123 [0.0101, 0.0150] bca", "96.2% [95.0%, 97.3%] bca", "-3.8 pp [-5.0 pp, -2.7 pp] bca",
		"+0.0123 [+0.0101, +0.0150] bca", ModelLabel, "| fidelity: mean KL [interval] |", " | — |\n"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
}
