package report

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"rig/internal/testenv"
	"strings"
	"testing"
	"time"
)

// TestBrowserRendersReport opens the sample report in headless Chromium,
// checks the figures are in the rendered DOM and takes a screenshot. Run it
// with -artifacts to keep report.html and report.png:
//
//	go test ./report -run Browser -v -artifacts -outputdir DIR
func TestBrowserRendersReport(t *testing.T) {
	bin, err := FindBrowser()
	if errors.Is(err, ErrNoBrowser) {
		testenv.NeedsSetup(t, "Chromium (make setup installs the Debian package chromium)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out := t.ArtifactDir()
	d := SampleData()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, d); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(out, "report.html")
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	dom, err := Browser{Bin: bin, Profile: browserProfile(t)}.DumpDOM(ctx, page)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFigures(dom, d); err != nil {
		t.Error(err)
	}
	if n := len(svgInDOM.FindAllString(dom, -1)); n != 8 {
		t.Errorf("%d figures in the DOM, want 8 (four for each of two job kinds)", n)
	}
	// The hostile model output is text in the DOM, not elements.
	if strings.Contains(dom, "<img") {
		t.Error("rendered DOM contains <img: a model output was not escaped")
	}
	if n := strings.Count(dom, "<script"); n != 2 {
		t.Errorf("rendered DOM has %d script elements, want the page's own 2: a model output was not escaped", n)
	}
	if !strings.Contains(dom, "&lt;script&gt;alert(") {
		t.Error("the escaped hostile output is missing from the DOM; the paired row was dropped")
	}

	shot := filepath.Join(out, "report.png")
	if err := (Browser{Bin: bin, Profile: browserProfile(t)}).Screenshot(ctx, page, shot, 1280, 2400); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	b := img.Bounds()
	if b.Dx() != 1280 || b.Dy() != 2400 {
		t.Errorf("screenshot is %dx%d, want 1280x2400", b.Dx(), b.Dy())
	}
	// A blank page is all one colour; a rendered report has text, tables
	// and figures over a good share of it.
	inked, all := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xe000 || g < 0xe000 || bl < 0xe000 {
				inked++
			}
			all++
		}
	}
	if frac := float64(inked) / float64(all); frac < 0.02 {
		t.Errorf("screenshot is %.1f%% inked; the page looks blank", 100*frac)
	}
	t.Logf("report: %s\nscreenshot: %s", page, shot)
}

func TestCheckFiguresNoticesAMissingFigure(t *testing.T) {
	d := SampleData()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, d); err != nil {
		t.Fatal(err)
	}
	if err := CheckFigures(buf.String(), d); err != nil {
		t.Fatalf("the page as written fails the check: %v", err)
	}
	cut := strings.Replace(buf.String(), `<svg id="fig-sweep-kind-apply-items"`, `<svg id="gone"`, 1)
	err := CheckFigures(cut, d)
	if err == nil || !strings.Contains(err.Error(), "fig-sweep-kind-apply-items") {
		t.Errorf("CheckFigures on a page without the sweep = %v, want an error naming it", err)
	}
}

func TestFindBrowserHonoursEnv(t *testing.T) {
	t.Setenv("RIG_CHROMIUM", filepath.Join(t.TempDir(), "no-such-chromium"))
	if _, err := FindBrowser(); err == nil {
		t.Error("FindBrowser accepted a RIG_CHROMIUM that does not exist")
	}
}

// The report's picture is the whole page: as tall as the document Chromium
// lays out at its width (a fixed 4,000 px window cut a stopped study's
// early-stopping section out of it), with no blank strip under its end.
func TestPageScreenshotIsTheWholePage(t *testing.T) {
	dir := t.TempDir()
	ctx, page := openReport(t, SampleData(), dir)
	height := eval[int](t, ctx, `document.documentElement.scrollHeight`)
	bin, err := FindBrowser()
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "report.png")
	if err := (Browser{Bin: bin, Profile: browserProfile(t)}).PageScreenshot(t.Context(), page, shot, 1280); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	// The last mark may sit above the document's end by its bottom margin.
	if b.Dx() != 1280 || b.Dy() > height+24 || b.Dy() < height-200 {
		t.Errorf("the screenshot is %dx%d; the page is 1280 wide and %d tall", b.Dx(), b.Dy(), height)
	}
	t.Logf("page %d px tall, screenshot %dx%d", height, b.Dx(), b.Dy())
}
