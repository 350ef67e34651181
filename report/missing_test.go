package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestMissingPairsAndNoOutputAreShown: both renderers print a pair's missing
// pairs with the tasks and the arm lacking each, and list per arm the tasks
// that never produced an output; with complete data they print a zero and
// no such section.
func TestMissingPairsAndNoOutputAreShown(t *testing.T) {
	tests := []struct {
		name     string
		missing  []string
		noOutput []NoOutput
		want     []string
		wantNot  []string
	}{
		{name: "complete", want: []string{"missing pairs"}, wantNot: []string{"Tasks that never produced an output"}},
		{name: "missing", missing: []string{"t07 (lacks " + "X" + ")", "t09 (lacks both)"}, noOutput: []NoOutput{{Arm: "X", Tasks: []string{"t07", "t09"}}},
			want: []string{"2: t07 (lacks X), t09 (lacks both)", "Tasks that never produced an output", "t07, t09"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := SampleData()
			k := &d.Kinds[0]
			arm := k.Pairs[0].Challenger
			for i := range tc.missing {
				tc.missing[i] = strings.ReplaceAll(tc.missing[i], "X", arm)
			}
			for i := range tc.noOutput {
				tc.noOutput[i].Arm = arm
			}
			k.Pairs[0].Missing, k.Pairs[0].MissingTasks, k.NoOutput = len(tc.missing), tc.missing, tc.noOutput
			var md bytes.Buffer
			if err := WriteMarkdown(&md, d); err != nil {
				t.Fatal(err)
			}
			html := renderPage(t, d)
			for where, text := range map[string]string{"Markdown": md.String(), "HTML": html} {
				for _, w := range tc.want {
					w = strings.ReplaceAll(w, "X", arm)
					if !strings.Contains(strings.ToLower(text), strings.ToLower(w)) {
						t.Errorf("%s lacks %q", where, w)
					}
				}
				for _, w := range tc.wantNot {
					if strings.Contains(text, w) {
						t.Errorf("%s has %q", where, w)
					}
				}
			}
		})
	}
}
