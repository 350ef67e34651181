package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestExcludedTasksAreListedWithTheirReason: a task the design left out is
// listed, with its reason, in the Markdown and the HTML; with none left out
// neither has the section.
func TestExcludedTasksAreListedWithTheirReason(t *testing.T) {
	for _, excluded := range [][]Excluded{nil, {{Task: "ar-fields-1", Why: "prompt longer than the <1024>-token context"}}} {
		d := SampleData()
		d.Kinds[0].Excluded = excluded
		var md bytes.Buffer
		if err := WriteMarkdown(&md, d); err != nil {
			t.Fatal(err)
		}
		html := renderPage(t, d)
		for where, text := range map[string]string{"Markdown": md.String(), "HTML": html} {
			has := strings.Contains(text, "Tasks left out by the design")
			if has != (len(excluded) > 0) {
				t.Errorf("%s: section shown = %v with %d excluded", where, has, len(excluded))
			}
		}
		if len(excluded) > 0 {
			if !strings.Contains(md.String(), "- ar-fields-1: prompt longer than the <1024>-token context") {
				t.Errorf("Markdown lacks the task and its reason:\n%s", md.String())
			}
			if !strings.Contains(html, "<b>ar-fields-1</b>: prompt longer than the &lt;1024&gt;-token context") {
				t.Error("HTML lacks the task and its (escaped) reason")
			}
		}
	}
}

// TestNearDuplicatesAreListed: a bank's near-duplicate pairs are listed with
// their similarity and the method that found them, in the Markdown and the
// HTML; a bank with none has no such section.
func TestNearDuplicatesAreListed(t *testing.T) {
	for _, near := range [][]NearDuplicate{nil, {{A: "xj-invoice-1", B: "xj-invoice-2", Similarity: 0.83}}} {
		d := SampleData()
		d.Kinds[0].NearDuplicates = near
		if near != nil {
			d.Kinds[0].NearMethod = "word 3-gram Jaccard >= 0.60"
		}
		var md bytes.Buffer
		if err := WriteMarkdown(&md, d); err != nil {
			t.Fatal(err)
		}
		html := renderPage(t, d)
		for where, text := range map[string]string{"Markdown": md.String(), "HTML": html} {
			if has := strings.Contains(text, "Near-duplicate tasks"); has != (near != nil) {
				t.Errorf("%s: section shown = %v with %d pairs", where, has, len(near))
			}
		}
		if near != nil {
			if !strings.Contains(md.String(), "- xj-invoice-1 and xj-invoice-2: 0.83") || !strings.Contains(md.String(), "word 3-gram Jaccard") {
				t.Errorf("Markdown lacks the pair or the method:\n%s", md.String())
			}
			if !strings.Contains(html, "<b>xj-invoice-1</b> and <b>xj-invoice-2</b>: 0.83") || !strings.Contains(html, "Jaccard &gt;= 0.60") {
				t.Error("HTML lacks the pair or the method")
			}
		}
	}
}
