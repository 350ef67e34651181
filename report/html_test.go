package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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
			// The page's own two script elements (its data and its hashed
			// script) are checked by TestScriptIsPinnedByItsHash; nothing
			// else may be a script.
			page = ownScripts.ReplaceAllString(page, "")
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
			if !strings.Contains(page, `Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-`) {
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
	d.Kinds[1].Sweep, d.Kinds[1].Cost, d.Kinds[1].Pairs, d.Kinds[1].Paired, d.Kinds[1].Rows = nil, nil, nil, nil, nil
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

// ownScripts matches the page's data block and its one script.
var ownScripts = regexp.MustCompile(`(?s)<script type="application/json" id="report-data">.*?</script>\n<script>.*?</script>`)

// TestScriptIsPinnedByItsHash: the page has exactly one script, its hash
// is the one the CSP allows, and the data block is JSON that decodes to
// the report's rows with every output intact.
func TestScriptIsPinnedByItsHash(t *testing.T) {
	d := SampleData()
	page := renderPage(t, d)
	if n := strings.Count(page, "<script"); n != 2 {
		t.Fatalf("%d <script elements, want 2 (the data block and the page's script)", n)
	}
	m := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no inline script")
	}
	sum := sha256.Sum256([]byte(m[1]))
	want := "script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	if !strings.Contains(page, want) {
		t.Errorf("the CSP does not allow the page's script by its hash (%s)", want)
	}
	j := regexp.MustCompile(`(?s)<script type="application/json" id="report-data">(.*?)</script>`).FindStringSubmatch(page)
	if j == nil {
		t.Fatal("no data block")
	}
	var pd pageData
	if err := json.Unmarshal([]byte(j[1]), &pd); err != nil {
		t.Fatalf("the data block is not JSON: %v", err)
	}
	if len(pd.Kinds) != 2 || len(pd.Kinds[0].Rows) != len(d.Kinds[0].Rows) {
		t.Fatalf("data block has %d kinds, want 2 with %d rows", len(pd.Kinds), len(d.Kinds[0].Rows))
	}
	if got := pd.Kinds[0].Rows[0].Challenger.Output; got != hostileOutput {
		t.Errorf("the hostile output came back as %q", got)
	}
}

// FuzzPageDataStaysInItsBlock: whatever an output holds, the data block
// ends where the page ends it and decodes back to the same text.
func FuzzPageDataStaysInItsBlock(f *testing.F) {
	for _, s := range []string{hostileOutput, "</script><script>alert(1)</script>", "<!--<script>", "\u2028\u2029", "</SCRIPT >"} {
		f.Add(s)
	}
	base := SampleData()
	base.Kinds = base.Kinds[:1]
	f.Fuzz(func(t *testing.T, s string) {
		d := base
		k := d.Kinds[0]
		k.Rows = []Row{k.Rows[0]}
		k.Rows[0].Baseline.Output, k.Rows[0].Category = s, s
		d.Kinds = []Kind{k}
		var buf bytes.Buffer
		if err := WriteHTML(&buf, d); err != nil {
			t.Fatal(err)
		}
		page := buf.String()
		if n := strings.Count(strings.ToLower(page), "</script"); n != 2 {
			t.Fatalf("output %q: %d closing script tags, want 2", s, n)
		}
		j := regexp.MustCompile(`(?s)<script type="application/json" id="report-data">(.*?)</script>`).FindStringSubmatch(page)
		var pd pageData
		if err := json.Unmarshal([]byte(j[1]), &pd); err != nil {
			t.Fatal(err)
		}
		var want string
		b, _ := json.Marshal(s) // invalid UTF-8 comes back as U+FFFD, as json gives it
		json.Unmarshal(b, &want)
		if got := pd.Kinds[0].Rows[0].Baseline.Output; got != want {
			t.Fatalf("output %q decoded as %q", s, got)
		}
	})
}
