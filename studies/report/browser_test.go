package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium finds the browser the lead's provisioning installs; the test
// skips, saying why, only when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RIG_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium: looked for $RIG_CHROMIUM, /usr/bin/chromium, chromium, chromium-browser, google-chrome on PATH; install it (apt-get install chromium) to check the report in a real browser")
	return ""
}

// headless runs Chromium on a local file with everything that could reach
// the network turned off, and name resolution mapped to nothing so that a
// stray URL could not leave the machine even if the report held one.
func headless(t *testing.T, bin, profile string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND",
		"--user-data-dir=" + profile,
	}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstderr:\n%s", bin, args, err, stderr.String())
	}
	return stdout.Bytes()
}

func TestBrowserRendersReport(t *testing.T) {
	bin := chromium(t)
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
	url := "file://" + page

	dom := string(headless(t, bin, t.TempDir(), "--dump-dom", url))
	if !strings.Contains(dom, "</html>") {
		t.Fatalf("--dump-dom returned no document (%d bytes)", len(dom))
	}

	// Every figure the data calls for is an <svg> in the rendered DOM, with
	// its class, a <title> for screen readers, and drawn content.
	svgs := regexp.MustCompile(`(?s)<svg id="([^"]+)" class="fig (fig-[a-z]+)"[^>]*>(.*?)</svg>`).FindAllStringSubmatch(dom, -1)
	got := map[string]string{}
	for _, m := range svgs {
		got[m[1]] = m[2]
		if !strings.Contains(m[3], "<title") {
			t.Errorf("figure %s has no <title> in the DOM", m[1])
		}
		if strings.Count(m[3], "<path") < 3 {
			t.Errorf("figure %s has %d paths in the DOM; a drawn figure has axes and marks", m[1], strings.Count(m[3], "<path"))
		}
	}
	v, err := newView(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range v.Kinds {
		for class, id := range map[string]string{"fig-forest": "fig-forest-" + k.ID, "fig-pbest": "fig-pbest-" + k.ID, "fig-sweep": "fig-sweep-" + k.ID, "fig-cost": "fig-cost-" + k.ID} {
			if got[id] != class {
				t.Errorf("rendered DOM lacks <svg id=%q class=\"fig %s\"> (figures seen: %v)", id, class, got)
			}
		}
	}

	// The hostile model output is text in the DOM, not elements.
	for _, bad := range []string{"<script", "<img"} {
		if strings.Contains(dom, bad) {
			t.Errorf("rendered DOM contains %q: a model output was not escaped", bad)
		}
	}
	if !strings.Contains(dom, "&lt;script&gt;alert(") {
		t.Error("the escaped hostile output is missing from the DOM; the paired row was dropped")
	}

	shot := filepath.Join(out, "report.png")
	headless(t, bin, t.TempDir(), "--hide-scrollbars", "--screenshot="+shot, "--window-size=1280,2400", url)
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
	// A blank page would be all one colour; a rendered report has text,
	// tables and figures over a good share of the page.
	inked := 0
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xe000 || g < 0xe000 || bl < 0xe000 {
				inked++
			}
		}
	}
	if frac := float64(inked) / float64((b.Dx()/4)*(b.Dy()/4)); frac < 0.02 {
		t.Errorf("screenshot is %.1f%% inked; the page looks blank", 100*frac)
	}
	t.Logf("report: %s\nscreenshot: %s", page, shot)
}
