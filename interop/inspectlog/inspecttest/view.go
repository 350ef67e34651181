package inspecttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"rig/report"
)

// View serves dir with `inspect view` on a loopback port, opens it in
// headless Chromium, opens the log whose file name is file, waits until
// the page shows want (a sample's id), and returns the page's text and a
// screenshot of it (PNG). A machine without Chromium skips the test, as
// report's browser tests do.
func View(t testing.TB, bin, dir, file, want string) (text string, png []byte) {
	t.Helper()
	browser, err := report.FindBrowser()
	if errors.Is(err, report.ErrNoBrowser) {
		t.Skipf("skipping the viewer check: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, bin, dir)
	profile, remove, err := report.TempProfile()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remove() })
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(profile), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	url := base + "/#/logs/" + file
	if err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := chromedp.Run(ctx, chromedp.Text("body", &text, chromedp.ByQuery)); err != nil {
			t.Fatalf("reading %s: %v", url, err)
		}
		if strings.Contains(text, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inspect view did not show %q at %s within 2 minutes; the page says:\n%s", want, url, text)
		}
		time.Sleep(time.Second)
	}
	if err := chromedp.Run(ctx, chromedp.Sleep(time.Second), chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
	return text, png
}

// serve starts `inspect view` on a free loopback port and waits until it
// answers; the server is stopped when the test ends.
func serve(t testing.TB, bin, dir string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "view", "--log-dir", dir, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--no-trust-content")
	cmd.Env = append(os.Environ(), quiet...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for start := time.Now(); time.Since(start) < 2*time.Minute; time.Sleep(500 * time.Millisecond) {
		if resp, err := http.Get(base + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
	}
	t.Fatalf("inspect view did not answer on %s within 2 minutes:\n%s", base, log.String())
	return ""
}
