package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteMarkdown(t *testing.T) {
	d := SampleData()
	d.Study = "Study\n# injected heading"
	d.Kinds[0].Arms[0].Runtime = "ollama | 0.17"
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, d); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, w := range []string{
		"# Study # injected heading\n",
		`ollama \| 0.17`,
		"> " + CardCaveat,
		"````text\n" + hostileOutput + "\n````\n", // the output holds ``` so the fence is four long
		d.Licences[0].Line(),
		`not shown: \|Δ\|`,
		"≈ 4.2 kJ (estimate)",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("Markdown lacks %q", w)
		}
	}
	if strings.Contains(md, "\n# injected heading") {
		t.Error("a newline in the study name started a Markdown heading")
	}
	// Every table row has as many cells as its header.
	var cols int
	for _, l := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(l, "|---"):
		case strings.HasPrefix(l, "| "):
			n := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|")
			if cols == 0 {
				cols = n
			} else if n != cols {
				t.Errorf("table row has %d pipes, header has %d: %q", n, cols, l)
			}
		default:
			cols = 0
		}
	}
}

func TestFenced(t *testing.T) {
	for _, tc := range []struct{ in, fence string }{
		{"plain", "```"},
		{"a ``` b", "````"},
		{"`````", "``````"},
		{"", "```"},
	} {
		got := fenced(tc.in)
		if !strings.HasPrefix(got, tc.fence+"text\n") || !strings.HasSuffix(got, "\n"+tc.fence+"\n") {
			t.Errorf("fenced(%q) = %q, want fence %q", tc.in, got, tc.fence)
		}
	}
}

// FuzzFenced checks that no text can close its own fence early.
func FuzzFenced(f *testing.F) {
	for _, s := range []string{"", "```", "a\n```\nb", "````x", hostileOutput} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := fenced(s)
		fence := out[:strings.Index(out, "text\n")]
		if n := strings.Count(out, fence); n != 2 {
			t.Fatalf("fence %q occurs %d times in %q", fence, n, out)
		}
	})
}
