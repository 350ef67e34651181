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
