package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rig/api"
	"rig/internal/layout"
)

// The attacks in this file come in over the daemon's real socket (Run, as
// `rig daemon` starts it) and the workspace's real HTTP listener. Each
// passes only when the attack fails.

// runDaemon starts a real daemon on home with a private socket, lock and
// HOME, and returns a client once it answers.
func runDaemon(t *testing.T, home string) api.Client {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("HOME", tmp) // the governor's state folder is under HOME
	t.Setenv(daemonLockEnv, filepath.Join(tmp, "daemon.lock"))
	sock := filepath.Join(tmp, "rig.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Home: home, Socket: sock, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("daemon: %v", err)
		}
	})
	c := api.Client{Socket: sock}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var names []string
		err := c.Call(context.Background(), "list", struct{}{}, &names, nil)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not answer: %v", err)
		}
	}
}

// plantStudy writes, in dir, what makes a folder look like a registered
// study whose lifecycle file says a Director approved it: a study nobody
// registered, reviewed or approved.
func plantStudy(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{
		"registration.json": `{"name": "planted"}`,
		legacyLifecycle:     `{"state": "approved", "design_hash": "` + strings.Repeat("a", 64) + `", "director": "nobody"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// folderEntries is a folder's entries, to show that nothing was created there.
func folderEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestRedTeamStudyNameIsNotAPath sends study names that are paths, and a
// valid name whose folder is a planted symlink, to several of the daemon's
// methods over its socket. Each must be refused before any file is opened:
// with code invalid_name (naming the rule) for the names, and the planted
// folders must hold exactly what was planted: no store created, no
// lifecycle imported.
func TestRedTeamStudyNameIsNotAPath(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	outside := filepath.Join(tmp, "x") // home/studies/../../x
	plantStudy(t, outside)
	linked := filepath.Join(tmp, "y")
	plantStudy(t, linked)
	c := runDaemon(t, home)
	if err := os.Symlink(linked, filepath.Join(home, "studies", "linked")); err != nil {
		t.Fatal(err)
	}
	planted := []string{legacyLifecycle, "registration.json"}

	names := []string{"../../x", "..%2F..%2Fx", outside, "../studies/../../x"}
	methods := []string{"status", "check", "approve", "freeze", "report", "cancel", "export"}
	for _, name := range names {
		for _, m := range methods {
			req := NameRequest{Name: name, Why: "red team", Audit: true}
			err := c.Call(context.Background(), m, req, nil, io.Discard)
			var re *api.RemoteError
			if !errors.As(err, &re) || re.Code != "invalid_name" || !strings.Contains(err.Error(), "[a-z0-9]") {
				t.Errorf("%s %q: %v (code %q); want refused with code invalid_name, naming the rule", m, name, err, codeOfRemote(err))
			}
		}
	}
	for _, m := range methods {
		err := c.Call(context.Background(), m, NameRequest{Name: "linked", Why: "red team", Audit: true}, nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("%s of a study whose folder is a planted symlink: %v; want refused, naming the link", m, err)
		}
	}
	for _, dir := range []string{outside, linked} {
		if got := folderEntries(t, dir); !slices.Equal(got, planted) {
			t.Errorf("%s holds %v after the attack; want only what was planted %v (a store was opened or a lifecycle imported)", dir, got, planted)
		}
	}
	var list []string
	if err := c.Call(context.Background(), "list", struct{}{}, &list, nil); err != nil || len(list) != 0 {
		t.Errorf("list after the attack: %v %v; want no study", list, err)
	}
}

// TestRedTeamExecutionAndProposalIDsAreNotPaths sends execution and
// proposal ids that are paths, over the daemon's socket to a stored study
// with a finished execution: each is refused with invalid_name.
func TestRedTeamExecutionAndProposalIDsAreNotPaths(t *testing.T) {
	cs := newCardStudy(t, "", nil)
	c := serveOn(t, cs.svc, cs.svc.methods())
	for _, tc := range []struct {
		method string
		req    any
	}{
		{"proposal-show", ProposalRequest{ID: "../baseline"}},
		{"proposal-approve", ProposalRequest{ID: "../../x/evil", Why: "red team"}},
		{"report", ReportRequest{Name: cs.name, ReportOptions: ReportOptions{Execution: "../../../x"}}},
		{"grade", RegradeRequest{Study: cs.name, Execution: "../../../x"}},
		{"merge", MergeRequest{Study: cs.name, Execution: "../x"}},
		{"decide", DecideRequest{Study: cs.name, Execution: "../../x", Rationale: "red team", ComparisonHash: "x"}},
	} {
		err := c.Call(context.Background(), tc.method, tc.req, nil, io.Discard)
		if codeOfRemote(err) != "invalid_name" {
			t.Errorf("%s %+v: %v (code %q); want invalid_name", tc.method, tc.req, err, codeOfRemote(err))
		}
	}
}

// studyDir is the study's folder as the layout gives it (tests that plant
// or inspect its files).
func studyDir(t *testing.T, s *Service, name string) layout.Study {
	t.Helper()
	d, err := s.study(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func codeOfRemote(err error) string {
	var re *api.RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	return ""
}

// TestRedTeamWorkspaceStudyNameIsNotAPath asks the real workspace for
// /study/..%2F..%2Fx and /api/progress/..%2F..%2Fx (a slash the mux does
// not clean because it is encoded) where x is a planted study: refused as
// a bad name (400), and nothing created or imported in the planted folder.
func TestRedTeamWorkspaceStudyNameIsNotAPath(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	outside := filepath.Join(tmp, "x")
	plantStudy(t, outside)
	c := runDaemon(t, home)
	var info UIInfo
	if err := c.Call(context.Background(), "ui", struct{}{}, &info, nil); err != nil {
		t.Fatal(err)
	}
	client := workspaceClient(t, info.URL)
	u, _ := url.Parse(info.URL)
	for _, path := range []string{"/study/..%2F..%2Fx", "/api/progress/..%2F..%2Fx", "/progress/..%2F..%2Fx", "/study/%2E%2E%2F%2E%2E%2Fx"} {
		resp, err := client.Get("http://" + u.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "[a-z0-9]") {
			t.Errorf("GET %s: %d %q; want 400 naming the name rule", path, resp.StatusCode, body)
		}
	}
	if got := folderEntries(t, outside); !slices.Equal(got, []string{legacyLifecycle, "registration.json"}) {
		t.Errorf("%s holds %v after the attack; want only what was planted", outside, got)
	}
}

// workspaceClient opens the workspace's URL once, as a browser does, and
// returns a client that holds the session cookie it was given.
func workspaceClient(t *testing.T, raw string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	resp, err := c.Get(raw)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("opening %s: %d", raw, resp.StatusCode)
	}
	return c
}

// TestRedTeamWorkspaceURLTokenIsSingleUse replays the workspace's URL (as
// anyone who read it from xdg-open's argv or the browser's history could)
// after its owner opened it: the replay is refused. The first load trades
// the URL's token for an HttpOnly, SameSite=Strict cookie and redirects to
// the same path without the token; the cookie then opens every page.
func TestRedTeamWorkspaceURLTokenIsSingleUse(t *testing.T) {
	c := runDaemon(t, filepath.Join(t.TempDir(), "home"))
	var info UIInfo
	if err := c.Call(context.Background(), "ui", struct{}{}, &info, nil); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(info.URL)
	if err != nil {
		t.Fatal(err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, cookies ...*http.Cookie) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+u.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	first, _ := get(u.RequestURI())
	var session *http.Cookie
	for _, ck := range first.Cookies() {
		if ck.Value != "" {
			session = ck
		}
	}
	if again, body := get(u.RequestURI()); again.StatusCode != http.StatusForbidden {
		t.Errorf("the URL's token used a second time: %d %q; want 403", again.StatusCode, body)
	}
	if first.StatusCode != http.StatusSeeOther || first.Header.Get("Location") != "/" || session == nil ||
		!session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/" {
		t.Errorf("first load of %s: %d, Location %q, cookie %+v; want 303 to / with an HttpOnly, SameSite=Strict, Path=/ cookie",
			info.URL, first.StatusCode, first.Header.Get("Location"), session)
	}
	if session == nil {
		t.FailNow()
	}
	if resp, body := get("/", session); resp.StatusCode != http.StatusOK || !strings.Contains(body, "rig workspace") {
		t.Errorf("the page with the session cookie: %d", resp.StatusCode)
	}
	// A redirect never leaves this workspace, even from a path that reads
	// as another host.
	var second UIInfo
	if err := c.Call(context.Background(), "ui", struct{}{}, &second, nil); err != nil {
		t.Fatal(err)
	}
	su, _ := url.Parse(second.URL)
	if resp, _ := get("//example.org/?" + su.RawQuery); resp.StatusCode != http.StatusSeeOther || strings.HasPrefix(resp.Header.Get("Location"), "//") {
		t.Errorf("a token redeemed at //example.org/: %d to %q; want 303 to a path on this host", resp.StatusCode, resp.Header.Get("Location"))
	}
	forged := &http.Cookie{Name: session.Name, Value: strings.Repeat("0", len(session.Value))}
	if resp, _ := get("/", forged); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a forged cookie: %d, want 403", resp.StatusCode)
	}
	if resp, _ := get("/"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("no token and no cookie: %d, want 403", resp.StatusCode)
	}
}

// TestRedTeamPlantedLinksInAStudyFolder plants, in a study folder of a
// valid name, a store.bolt that links to a file elsewhere and (in another)
// a lifecycle.json that links to an approved lifecycle elsewhere. The
// daemon must follow neither: the store is not created at the link's
// target, and the linked lifecycle is not imported.
func TestRedTeamPlantedLinksInAStudyFolder(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	elsewhere := filepath.Join(tmp, "elsewhere")
	plantStudy(t, elsewhere)
	c := runDaemon(t, home)
	for study, link := range map[string]struct{ name, target string }{
		"linked-store":     {"store.bolt", filepath.Join(elsewhere, "victim.bolt")},
		"linked-lifecycle": {legacyLifecycle, filepath.Join(elsewhere, legacyLifecycle)},
	} {
		dir := filepath.Join(home, "studies", study)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "registration.json"), []byte(`{"name": "`+study+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(link.target, filepath.Join(dir, link.name)); err != nil {
			t.Fatal(err)
		}
		err := c.Call(context.Background(), "status", NameRequest{Name: study}, nil, io.Discard)
		if codeOfRemote(err) != "link_refused" {
			t.Errorf("status of %s (its %s a planted link): %v (code %q); want link_refused", study, link.name, err, codeOfRemote(err))
		}
	}
	if got := folderEntries(t, elsewhere); !slices.Equal(got, []string{legacyLifecycle, "registration.json"}) {
		t.Errorf("%s holds %v after the attack; want only what was planted (a store created through a link, or a lifecycle imported through one)", elsewhere, got)
	}
}
