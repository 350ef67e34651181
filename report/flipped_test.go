package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlippedTasksSectionSaysWhatItHolds: the section of tasks that flipped
// holds newly fixed and newly failing tasks, each labelled; its title once
// read "Regressions" above a list of newly fixed tasks only (issue 46).
func TestFlippedTasksSectionSaysWhatItHolds(t *testing.T) {
	d := SampleData()
	k := &d.Kinds[0]
	c, b := k.Arms[1].Arm, k.Arms[0].Arm
	k.Paired = []PairedRow{
		{Task: "t-fixed", Challenger: c, Baseline: b, Change: NewlyFixed, ChallengerScore: 1},
		{Task: "t-failing", Challenger: c, Baseline: b, Change: NewlyFailing, BaselineScore: 1},
	}
	page := renderPage(t, d)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"HTML": page, "Markdown": md.String()} {
		if strings.Contains(out, ">Regressions<") || strings.Contains(out, "# Regressions") {
			t.Errorf("%s titles the flipped tasks \"Regressions\"", name)
		}
		if !strings.Contains(strings.ToLower(out), "tasks that flipped") {
			t.Errorf("%s has no section titled \"Tasks that flipped\"", name)
		}
		for _, label := range []string{"newly fixed", "newly failing"} {
			if !strings.Contains(out, label) {
				t.Errorf("%s does not label a row %q", name, label)
			}
		}
	}
}
