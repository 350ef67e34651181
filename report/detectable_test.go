package report

import (
	"bytes"
	"html"
	"strings"
	"testing"
)

// TestDetectableIsLabelledStatedOrComputed: the design's stated smallest
// detectable difference and the one rig computes for the planned tasks are
// both shown, each labelled, in the Markdown, the page and the forest plot's
// caption; a figure never appears bare as "the task count can detect".
func TestDetectableIsLabelledStatedOrComputed(t *testing.T) {
	d := SampleData()
	k := &d.Kinds[0]
	stated, computed := 0.4, 0.403
	k.Detectable, k.DetectableComputed, k.DetectableTasks, k.DetectablePower, k.DetectablePilot = &stated, &computed, 27, 0.8, 0.3

	var md, page bytes.Buffer
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, d); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"markdown": md.String(), "page": html.UnescapeString(page.String())} {
		want := []string{"smallest detectable difference stated by the design: ±0.400 at 80% power; computed by rig: ±0.403 for 27 tasks at 80% power"}
		if name == "page" { // the forest plot's caption
			want = append(want, "the smallest difference the design states its task count can detect at 80% power (computed by rig: ±0.403 for 27 tasks)")
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("the %s lacks %q", name, w)
			}
		}
		if strings.Contains(text, "detectable at 80% power: ±") || strings.Contains(text, "the task count can detect") {
			t.Errorf("the %s still shows a detectable difference unlabelled", name)
		}
	}

	// A pilot with too few tasks to see any lead: rig says that, not that
	// the design gave no pilot (the newcomer's 8-task study read so).
	k.DetectableComputed = nil
	md.Reset()
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "±0.400 at 80% power; computed by rig: none, 27 tasks cannot detect any lead at 80% power with the pilot's discordance of 0.300") {
		t.Errorf("with too few tasks the Markdown does not say so:\n%s", md.String())
	}

	// With no pilot, rig computes none and says so.
	k.DetectablePilot = 0
	md.Reset()
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "±0.400 at 80% power (rig computes none: the design gives no pilot discordance)") {
		t.Errorf("without a pilot the Markdown does not say rig computed none:\n%s", md.String())
	}
}
