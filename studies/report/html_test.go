package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func renderPage(t *testing.T, d Data) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, d); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	return buf.String()
}

func TestWriteHTMLIsSelfContained(t *testing.T) {
	bare := SampleData()
	bare.Cards, bare.Replay, bare.Decision, bare.Warnings = nil, nil, nil, nil
	for _, tc := range []struct {
		name string
		data Data
	}{
		{"full sample", SampleData()},
		{"no cards, replay, decision or warnings", bare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := renderPage(t, tc.data)
			// Anything that could make a browser fetch or run something.
			for _, bad := range []string{"http://", "https://", "<script", "<link", "<img", "<iframe", "@import", "url(", "xlink:href", "<?xml"} {
				if strings.Contains(page, bad) {
					i := strings.Index(page, bad)
					t.Errorf("report contains %q near %q", bad, page[max(0, i-60):min(len(page), i+60)])
				}
			}
			if m := regexp.MustCompile(`<[a-zA-Z][^>]*\s(src|href|action|srcset)="[^"#]`).FindString(page); m != "" {
				t.Errorf("report has an element that points outside itself: %q", m)
			}
			if !strings.Contains(page, `Content-Security-Policy" content="default-src 'none'`) {
				t.Error("report lacks the CSP that forbids every load")
			}
		})
	}
}

func TestWriteHTMLShowsEverything(t *testing.T) {
	d := SampleData()
	page := renderPage(t, d)
	want := []string{
		d.Study, d.DesignHash, d.ComparisonHash, d.Machine,
		d.Sentences.JobKinds, d.Decision.Actor, d.Decision.NextBaseline,
		CardCaveat[:40], // the apostrophe is escaped; the start is enough to find it
		"&lt;script&gt;alert(",
		"not shown: |Δ|",
		"≈ 4.2 kJ (estimate)",
		"stack differs",
		"doesn't fit",
	}
	for _, l := range d.Licences {
		want = append(want, l.Item+" ("+l.Entry+", "+l.Use+": "+l.Verdict+")")
	}
	for _, k := range d.Kinds {
		for _, a := range k.Arms {
			want = append(want, short(a.Digest), interval(a.Score))
		}
		for _, p := range k.Pairs {
			want = append(want, deltaText(p.Delta), `class="badge o-`+p.Outcome+`"`)
		}
		for _, id := range []string{"fig-forest-", "fig-pbest-", "fig-sweep-", "fig-cost-"} {
			want = append(want, `<svg id="`+id+"kind-"+slug(k.Name)+`"`)
		}
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("report lacks %q", w)
		}
	}
	// A missing energy reading is a dash in the cost table, never "0 J".
	if strings.Contains(page, ">0 J") {
		t.Error("a missing energy reading was rendered as 0 J")
	}
	if n := strings.Count(page, "<title id="); n != 8 {
		t.Errorf("%d figure titles, want 8 (four figures for each of two job kinds)", n)
	}
}

func TestWriteHTMLOmitsAbsentSections(t *testing.T) {
	d := SampleData()
	d.Cards, d.Replay, d.Decision, d.Warnings = nil, nil, nil, nil
	d.Kinds[1].Sweep, d.Kinds[1].Cost, d.Kinds[1].Pairs, d.Kinds[1].Paired = nil, nil, nil, nil
	page := renderPage(t, d)
	for _, absent := range []string{`id="cards"`, `id="replay"`, `id="decision"`, `id="warnings"`, "fig-sweep-kind-code-edits", "fig-cost-kind-code-edits", "fig-forest-kind-code-edits"} {
		if strings.Contains(page, absent) {
			t.Errorf("report has %q though its data is absent", absent)
		}
	}
	if !strings.Contains(page, "fig-sweep-kind-apply-items") {
		t.Error("the other job kind lost its sweep")
	}
}

func TestWriteHTMLRejectsInvalidData(t *testing.T) {
	d := SampleData()
	d.Kinds[0].Pairs[0].Challenger = "no-such-arm"
	var buf bytes.Buffer
	if err := WriteHTML(&buf, d); err == nil {
		t.Fatal("WriteHTML accepted a pair naming an unknown arm")
	}
	if buf.Len() != 0 {
		t.Errorf("WriteHTML wrote %d bytes before failing; a half report must not be written", buf.Len())
	}
}

// FuzzWriteHTMLOutput checks that no model output, whatever it holds, adds
// a single element to the page: escaped text has no '<'.
func FuzzWriteHTMLOutput(f *testing.F) {
	for _, s := range []string{"", hostileOutput, "</pre><script>x</script>", "]]><!--", "<svg onload=alert(1)>", "\x00\xff", "&lt;"} {
		f.Add(s)
	}
	base := SampleData()
	base.Kinds = base.Kinds[:1]
	base.Kinds[0].Paired = base.Kinds[0].Paired[:1]
	var clean bytes.Buffer
	row := base.Kinds[0].Paired[0]
	row.ChallengerOutput, row.BaselineOutput = "", ""
	d := base
	d.Kinds = []Kind{base.Kinds[0]}
	d.Kinds[0].Paired = []PairedRow{row}
	if err := WriteHTML(&clean, d); err != nil {
		f.Fatal(err)
	}
	want := strings.Count(clean.String(), "<")
	f.Fuzz(func(t *testing.T, s string) {
		r := row
		r.ChallengerOutput, r.BaselineOutput = s, s
		d.Kinds[0].Paired = []PairedRow{r}
		var buf bytes.Buffer
		if err := WriteHTML(&buf, d); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(buf.String(), "<"); got != want {
			t.Fatalf("output %q changed the number of tags: %d '<', want %d", s, got, want)
		}
	})
}
