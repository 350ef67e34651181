package daemon

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"rig/internal/testenv"
	"rig/report"
)

// TestBrowserWorkspaceSession opens the workspace's URL in headless
// Chromium, as a person does after rig ui: the SameSite=Strict cookie must
// survive the redirect that drops the token, the address bar must end
// without the token, no script may read the cookie (HttpOnly), the page's
// links must open the report by the cookie alone, and the same URL opened
// again must be refused.
func TestBrowserWorkspaceSession(t *testing.T) {
	bin, err := report.FindBrowser()
	if errors.Is(err, report.ErrNoBrowser) {
		testenv.NeedsSetup(t, "Chromium (make setup installs the Debian package chromium)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := newCardStudy(t, "", nil)
	info, err := c.svc.Reports().UI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	profile, remove, err := report.TempProfile()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := remove(); err != nil {
			t.Error(err)
		}
	})
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)

	var href, cookies, body string
	if err := chromedp.Run(ctx, chromedp.Navigate(info.URL), chromedp.WaitVisible("h1", chromedp.ByQuery),
		chromedp.Location(&href), chromedp.Evaluate(`document.cookie`, &cookies), chromedp.Text("body", &body, chromedp.ByQuery)); err != nil {
		t.Fatalf("opening %s: %v", info.URL, err)
	}
	u, _ := url.Parse(info.URL)
	if href != "http://"+u.Host+"/" || !strings.Contains(body, c.name) {
		t.Errorf("after the first load the address is %q (want http://%s/, the token gone) and the page names the study: %v", href, u.Host, strings.Contains(body, c.name))
	}
	if cookies != "" {
		t.Errorf("a script reads the session cookie: %q (want HttpOnly)", cookies)
	}
	var hasData bool
	if err := chromedp.Run(ctx, chromedp.Click(`a[href^="/study/"]`, chromedp.ByQuery), chromedp.WaitReady("#report-data", chromedp.ByQuery),
		chromedp.Location(&href), chromedp.Evaluate(`!!document.getElementById("report-data")`, &hasData)); err != nil {
		t.Fatalf("following the report link by the cookie: %v", err)
	}
	if !hasData || strings.Contains(href, "token") {
		t.Errorf("report page %q: data block %v; want the report, no token in the address", href, hasData)
	}
	if err := chromedp.Run(ctx, chromedp.Navigate(info.URL), chromedp.Text("body", &body, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "forbidden: this URL's token was used already") {
		t.Errorf("the same URL opened again shows %q; want it refused", body)
	}
}
