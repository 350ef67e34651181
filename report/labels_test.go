package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// sameCostData is a study whose cost figure has two arms at exactly the
// same point and a third beside them: the case where names printed over
// each other (issue 32).
func sameCostData() Data {
	d := SampleData()
	k := &d.Kinds[0]
	k.Cost = &CostFigure{Label: "mean wall time per trial (s)"}
	for i, a := range k.Arms {
		pt := CostPoint{Arm: a.Arm, Cost: 2.5, Score: 0}
		if i >= 2 {
			pt = CostPoint{Arm: a.Arm, Cost: 2.55, Score: 0.01}
		}
		k.Cost.Points = append(k.Cost.Points, pt)
	}
	return d
}

// TestCostLabelsNeverOverlap renders the figure in headless Chromium and
// measures every arm label's box as drawn: no two may intersect. It keeps a
// screenshot of the figure (cost.png) beside the page.
func TestCostLabelsNeverOverlap(t *testing.T) {
	d := sameCostData()
	if len(d.Kinds[0].Cost.Points) < 3 {
		t.Fatalf("sample has %d arms, want at least 3", len(d.Kinds[0].Cost.Points))
	}
	dir := artifactDir(t)
	ctx, _ := openReport(t, d, dir)
	id := "fig-cost-kind-" + slug(d.Kinds[0].Name)
	var names []string
	for _, p := range d.Kinds[0].Cost.Points {
		names = append(names, `"`+p.Arm+`"`)
	}
	type rect struct {
		Name                     string
		Left, Top, Right, Bottom float64
	}
	js := `(() => { const names = [` + strings.Join(names, ",") + `];
		return [...document.querySelectorAll("#` + id + ` text")].filter(e => names.includes(e.textContent.trim())).map(e => {
			const r = e.getBoundingClientRect(); return {Name: e.textContent.trim(), Left: r.left, Top: r.top, Right: r.right, Bottom: r.bottom}; }); })()`
	boxes := eval[[]rect](t, ctx, js)
	if len(boxes) != len(names) {
		t.Fatalf("found %d arm labels in %s, want %d: %+v", len(boxes), id, len(names), boxes)
	}
	for i := range boxes {
		for j := i + 1; j < len(boxes); j++ {
			a, b := boxes[i], boxes[j]
			if a.Left < b.Right && b.Left < a.Right && a.Top < b.Bottom && b.Top < a.Bottom {
				t.Errorf("labels %q %+v and %q %+v overlap", a.Name, a, b.Name, b)
			}
		}
	}
	var png []byte
	if err := chromedp.Run(ctx, chromedp.ScrollIntoView("#"+id, chromedp.ByID), chromedp.Screenshot("#"+id, &png, chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cost.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("figure: %s", filepath.Join(dir, "cost.png"))
}
