package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// ErrNoBrowser is returned by FindBrowser when no Chromium is installed.
var ErrNoBrowser = errors.New("no Chromium found")

// Browser is a headless Chromium used to check a report the way a reader
// sees it. It is for tests and demos; the report itself needs no browser.
type Browser struct {
	// Bin is the Chromium executable.
	Bin string
	// Profile is an empty directory for the browser's profile; a fresh one
	// per call keeps runs independent.
	Profile string
}

// TempProfile makes a fresh, empty profile directory for one Browser (or
// one DevTools session) and returns it with the function that removes it.
// Chromium's helper processes (the crash handler, a renderer finishing a
// write) can outlive the browser by a moment and keep writing under the
// profile, so a single RemoveAll may find a directory refilled behind it;
// remove tries again for a few seconds and only then says what is left.
func TempProfile() (dir string, remove func() error, err error) {
	dir, err = os.MkdirTemp("", "rig-browser-")
	if err != nil {
		return "", nil, fmt.Errorf("report: browser profile: %w", err)
	}
	remove = func() error {
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if err = os.RemoveAll(dir); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("report: removing the browser profile %s: %w", dir, err)
		}
		return nil
	}
	return dir, remove, nil
}

// FindBrowser looks for Chromium at $RIG_CHROMIUM, /usr/bin/chromium and
// on PATH.
func FindBrowser() (string, error) {
	if p := os.Getenv("RIG_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("RIG_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: looked at $RIG_CHROMIUM, /usr/bin/chromium and for chromium, chromium-browser, google-chrome on PATH (install it with apt-get install chromium)", ErrNoBrowser)
}

// run starts Chromium on a local file with everything that could reach the
// network turned off and name resolution mapped to nothing, so a stray URL
// could not leave the machine even if a report held one.
func (b Browser) run(ctx context.Context, page string, args ...string) ([]byte, error) {
	abs, err := filepath.Abs(page)
	if err != nil {
		return nil, fmt.Errorf("report: browser: %w", err)
	}
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND",
		"--user-data-dir=" + b.Profile,
	}
	cmd := exec.CommandContext(ctx, b.Bin, append(append(base, args...), "file://"+abs)...)
	// The page holds model outputs: the browser gets no terminal to reach.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("report: %s %s: %w\n%s", b.Bin, strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes(), nil
}

// DumpDOM returns the document as Chromium parsed and rendered it.
func (b Browser) DumpDOM(ctx context.Context, page string) (string, error) {
	out, err := b.run(ctx, page, "--dump-dom")
	if err != nil {
		return "", err
	}
	if !bytes.Contains(out, []byte("</html>")) {
		return "", fmt.Errorf("report: %s --dump-dom %s returned no document (%d bytes)", b.Bin, page, len(out))
	}
	return string(out), nil
}

// Screenshot writes a PNG of the page at the given window size.
func (b Browser) Screenshot(ctx context.Context, page, png string, width, height int) error {
	_, err := b.run(ctx, page, "--hide-scrollbars", "--screenshot="+png, fmt.Sprintf("--window-size=%d,%d", width, height))
	return err
}

// MaxPageHeight is the tallest page PageScreenshot takes whole, in pixels:
// Chromium draws a headless window of at most about 16,384.
const MaxPageHeight = 16000

// PageScreenshot writes a PNG of the whole page at the given width, up to
// MaxPageHeight: the window is drawn that tall and the blank rows under the
// page's end are cut. A fixed height cut the report's later parts (the
// early-stopping section of a stopped study) out of the picture.
func (b Browser) PageScreenshot(ctx context.Context, page, file string, width int) error {
	if err := b.Screenshot(ctx, page, file, width, MaxPageHeight); err != nil {
		return err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("report: screenshot %s: %w", file, err)
	}
	bounds := img.Bounds()
	bg := img.At(bounds.Max.X-1, bounds.Max.Y-1)
	br, bgG, bb, ba := bg.RGBA()
	last := bounds.Min.Y
	for y := bounds.Max.Y - 1; y >= bounds.Min.Y && last == bounds.Min.Y; y-- {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if r, g, b2, a := img.At(x, y).RGBA(); r != br || g != bgG || b2 != bb || a != ba {
				last = y
				break
			}
		}
	}
	// A margin of the page's own background under its last mark.
	end := min(bounds.Max.Y, last+24)
	sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok {
		return nil
	}
	var out bytes.Buffer
	if err := png.Encode(&out, sub.SubImage(image.Rect(bounds.Min.X, bounds.Min.Y, bounds.Max.X, end))); err != nil {
		return err
	}
	return os.WriteFile(file, out.Bytes(), 0o644)
}

var svgInDOM = regexp.MustCompile(`(?s)<svg id="([^"]+)" class="fig (fig-[a-z]+)"[^>]*>(.*?)</svg>`)

// CheckFigures checks that every figure d calls for is an <svg> in a
// rendered DOM, with its class, a <title>, and drawn marks.
func CheckFigures(dom string, d Data) error {
	v, err := newView(d)
	if err != nil {
		return err
	}
	type seen struct {
		class        string
		title, paths bool
	}
	got := map[string]seen{}
	for _, m := range svgInDOM.FindAllStringSubmatch(dom, -1) {
		got[m[1]] = seen{m[2], strings.Contains(m[3], "<title"), strings.Count(m[3], "<path") >= 3}
	}
	var errs []error
	for _, k := range v.Kinds {
		for _, f := range []*figure{k.Forest, k.PBest, k.Sweep, k.Cost} {
			if f == nil {
				continue
			}
			s, ok := got[f.ID]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("figure %s (%s) is not in the rendered DOM", f.ID, f.Title))
			case s.class != f.Class:
				errs = append(errs, fmt.Errorf("figure %s has class %q, want %q", f.ID, s.class, f.Class))
			case !s.title:
				errs = append(errs, fmt.Errorf("figure %s has no <title> in the rendered DOM", f.ID))
			case !s.paths:
				errs = append(errs, fmt.Errorf("figure %s has fewer than 3 paths: nothing was drawn", f.ID))
			}
		}
	}
	return errors.Join(errs...)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
