package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"rig/api"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/report"
	"rig/studies/studytest"
)

// matrixCell is one cell of a try's matrix as the browser shows it.
type matrixCell struct {
	Task    string `json:"task"`
	Arm     string `json:"arm"`
	Outcome string `json:"outcome"`
	Grade   string `json:"grade"`
	Output  string `json:"output"`
	Stats   string `json:"stats"`
	Markup  int    `json:"markup"` // elements inside the output: must be 0
}

// readMatrix reads the try page's status and its finished cells.
const readMatrix = `(() => {
  const st = document.getElementById("status");
  const cells = [...document.querySelectorAll("#matrix td.cell:not(.pending)")].map(td => ({
    task: td.closest("tr").dataset.task, arm: td.dataset.arm, outcome: td.dataset.outcome,
    grade: td.querySelector(".grade").textContent, stats: td.querySelector(".dim").textContent,
    output: td.querySelector("pre.output").textContent,
    markup: [...td.querySelectorAll("pre.output, summary.output-short")].reduce((n, e) => n + e.children.length, 0)}));
  return JSON.stringify({status: st ? st.dataset.status : "", pending: document.querySelectorAll("#matrix td.pending").length, cells});
})()`

type matrixView struct {
	Status  string       `json:"status"`
	Pending int          `json:"pending"`
	Cells   []matrixCell `json:"cells"`
}

// TestBrowserTryMatrix starts a real try of the quick study (two tasks, its
// two llama-server arms) and watches it in headless Chromium through rig
// ui, as a person would: the try is listed while it runs, its page shows
// the matrix with cells waiting and reloads itself, and once the try ends
// every cell holds that arm's output (as text: no element inside it),
// grade, tokens and latency, the same as the try's record, and the page
// stops reloading.
func TestBrowserTryMatrix(t *testing.T) {
	testenv.Long(t, "runs a try of the quick study on two real llama-servers and watches it in Chromium")
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes and models", err)
	bin, err := report.FindBrowser()
	testenv.NeedsSetup(t, "Chromium", err)
	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() }) // stops the try's warm runtimes
	svc.Gates = fakeGates{}           // the governor is tested on its own
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	info, err := svc.Reports().UI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(info.URL)
	if err != nil {
		t.Fatal(err)
	}
	bctx := browserContext(t, ctx, bin)
	if err := chromedp.Run(bctx, chromedp.Navigate(info.URL), chromedp.WaitVisible("h1", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(studytest.Root(t), "examples", "quick-study", "design.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		rec api.TryRecord
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := svc.Tries().Try(ctx, api.TryRequest{DesignFile: file, Design: raw, Tasks: 2})
		done <- result{rec, err}
	}()

	// While it runs: listed on /tries, its page reloading with cells waiting.
	id, first := "", matrixView{}
	for id == "" {
		select {
		case r := <-done:
			t.Fatalf("the try ended (%v) before the workspace listed it as running", r.err)
		case <-time.After(100 * time.Millisecond):
		}
		var href string
		if err := chromedp.Run(bctx, chromedp.Navigate("http://"+u.Host+"/tries"),
			chromedp.Evaluate(`(() => { const a = document.querySelector("#tries a[href^='/try/']"); return a ? a.getAttribute("href") : ""; })()`, &href)); err != nil {
			t.Fatal(err)
		}
		id = strings.TrimPrefix(href, "/try/")
	}
	var refresh bool
	if err := chromedp.Run(bctx, chromedp.Click(`#tries a[href^='/try/']`, chromedp.ByQuery), chromedp.WaitReady("#matrix", chromedp.ByQuery),
		chromedp.Evaluate(`!!document.querySelector("meta[http-equiv=refresh]")`, &refresh), evalJSON(readMatrix, &first)); err != nil {
		t.Fatal(err)
	}
	t.Logf("first view of %s: %+v", id, first)
	if first.Status != api.TryRunning || !refresh || first.Pending == 0 {
		t.Errorf("the running try's page: status %q, reloads %v, %d cells waiting; want running, reloading, some waiting", first.Status, refresh, first.Pending)
	}

	// Once it ends the page, reloading itself, fills every cell.
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the try did not end")
	}
	if r.err != nil {
		t.Fatalf("the try: %v", r.err)
	}
	var last matrixView
	for deadline := time.Now().Add(30 * time.Second); last.Status != api.TryDone && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		chromedp.Run(bctx, evalJSON(readMatrix, &last)) // may land mid-reload: read again
	}
	if err := chromedp.Run(bctx, chromedp.Evaluate(`!!document.querySelector("meta[http-equiv=refresh]")`, &refresh)); err != nil {
		t.Fatal(err)
	}
	if last.Status != api.TryDone || refresh || last.Pending != 0 {
		t.Fatalf("after the try: status %q, reloads %v, %d cells waiting; want done, still, none waiting", last.Status, refresh, last.Pending)
	}
	if len(last.Cells) != len(r.rec.Trials) || len(last.Cells) != 4 {
		t.Fatalf("the matrix shows %d cells; the try ran %d trials (want 2 tasks by 2 arms)", len(last.Cells), len(r.rec.Trials))
	}
	for _, c := range last.Cells {
		i := slices.IndexFunc(r.rec.Trials, func(tr api.TryTrial) bool { return tr.Task == c.Task && tr.Arm == c.Arm })
		if i < 0 {
			t.Errorf("cell %s × %s is not a trial of the try", c.Task, c.Arm)
			continue
		}
		tr := r.rec.Trials[i]
		grade := tr.Outcome
		if tr.Graded {
			grade = map[bool]string{true: "pass", false: "fail"}[tr.Pass] + fmt.Sprintf(" %.2f", tr.Score)
		}
		stats := fmt.Sprintf("%d→%d tok · %.2f s", tr.InputTokens, tr.OutputTokens, float64(tr.WallMS)/1000)
		if c.Grade != grade || !strings.HasPrefix(c.Stats, stats) || strings.TrimSpace(c.Output) != strings.TrimSpace(tr.Output) || c.Markup != 0 {
			t.Errorf("cell %s × %s shows grade %q, %q, output %q (%d elements in it); the trial: %q, %q, %q", c.Task, c.Arm, c.Grade, c.Stats, c.Output, c.Markup, grade, stats, tr.Output)
		}
		if strings.TrimSpace(tr.Output) == "" {
			t.Errorf("trial %s × %s has no output to show", c.Task, c.Arm)
		}
	}
}

// evalJSON evaluates a script that returns JSON and decodes it into v.
func evalJSON(script string, v any) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var s string
		if err := chromedp.Evaluate(script, &s).Do(ctx); err != nil {
			return err
		}
		return json.Unmarshal([]byte(s), v)
	})
}

// browserContext is a headless Chromium with a profile of its own, as
// TestBrowserWorkspaceSession starts it.
func browserContext(t *testing.T, ctx context.Context, bin string) context.Context {
	t.Helper()
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
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	return bctx
}
