package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"rig/receipts"
	"rig/ui"
)

// TestUIServesOnLoopbackWithToken starts the workspace on a stored study
// (a finished execution, not a live run) and checks: the page loads with
// the token, once, and is refused without it or with another; the session
// cookie it leaves opens the rest; nothing but GET is answered; the
// listener is bound to 127.0.0.1 alone; the report and the progress (with
// its capped count) are served.
func TestUIServesOnLoopbackWithToken(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	recs, err := c.st.Receipts(ctx, "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	capped := recs[1]
	capped.TaskID, capped.Outcome = "t9", receipts.Capped
	if err := c.st.PutReceipt(ctx, capped); err != nil {
		t.Fatal(err)
	}
	info, err := c.svc.Reports().UI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(info.URL)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || len(u.Query().Get("token")) != 64 {
		t.Fatalf("URL %q: want http://127.0.0.1:PORT/?token=<64 hex>", info.URL)
	}
	again, err := c.svc.Reports().UI(ctx)
	if au, perr := url.Parse(again.URL); err != nil || perr != nil || au.Host != u.Host || au.Query().Get("token") == u.Query().Get("token") || again.Started {
		t.Errorf("a second rig ui gave %+v, %v; want the same workspace under a fresh token, not started again", again, err)
	}
	token := u.Query().Get("token")
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar} // keeps the session cookie, follows the redirect
	get := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+u.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/", "/?token=", "/?token=" + strings.Repeat("0", 64), "/study/" + c.name, "/api/progress/" + c.name + "?token=x" + token} {
		if code, _ := get("GET", path); code != http.StatusForbidden {
			t.Errorf("GET %s without the right token: %d, want 403", path, code)
		}
	}
	if code, _ := get("POST", "/?token="+token); code != http.StatusMethodNotAllowed {
		t.Errorf("POST with the token: %d, want 405 (read-only)", code)
	}
	if code, body := get("GET", "/?token="+token); code != 200 || !strings.Contains(body, c.name) {
		t.Errorf("index with the token: %d, body names the study: %v", code, strings.Contains(body, c.name))
	}
	if code, _ := get("GET", "/?token="+token); code != http.StatusForbidden {
		t.Errorf("the token a second time: %d, want 403 (single use)", code)
	}
	code, page := get("GET", "/study/"+url.PathEscape(c.name))
	if code != 200 || !strings.Contains(page, `id="report-data"`) || !strings.Contains(page, `<section id="rows"`) {
		t.Errorf("report page: %d, has the data block and the rows section: %v", code, strings.Contains(page, `id="report-data"`))
	}
	code, raw := get("GET", "/api/progress/"+url.PathEscape(c.name))
	var p ui.Progress
	if err := json.Unmarshal([]byte(raw), &p); code != 200 || err != nil {
		t.Fatalf("progress: %d %v: %s", code, err, raw)
	}
	if len(p.Executions) != 1 || p.Executions[0].ID != "exec-1" || p.Executions[0].Done == 0 || p.Capped["exec-1"] != 1 || p.Governor == "" {
		t.Errorf("progress %+v: want exec-1 with trials done, 1 capped and a governor state", p)
	}
	if code, html := get("GET", "/progress/"+url.PathEscape(c.name)); code != 200 || !strings.Contains(html, `data-id="exec-1"`) {
		t.Errorf("progress page: %d", code)
	}
	port, _ := strconv.Atoi(u.Port())
	checkLoopbackOnly(t, port)
}

// checkLoopbackOnly reads the kernel's socket tables: the port must be
// listened on at 127.0.0.1 and on no other address, IPv6 included. It
// sends nothing anywhere.
func checkLoopbackOnly(t *testing.T, port int) {
	t.Helper()
	hexPort := fmt.Sprintf(":%04X", port)
	found := false
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			if table == "/proc/net/tcp" {
				t.Fatalf("reading %s: %v", table, err)
			}
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "0A" || !strings.HasSuffix(f[1], hexPort) {
				continue // not a listener on our port
			}
			if f[1] != "0100007F"+hexPort {
				t.Errorf("%s: port %d is listened on at %s; want 127.0.0.1 (0100007F) only", table, port, f[1])
			}
			found = true
		}
	}
	if !found {
		t.Errorf("no listener on port %d in /proc/net/tcp", port)
	}
}
