package ui

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rig/api"
	"rig/internal/layout"
)

// hostileOutput is what a model may answer: markup meant to run in the
// workspace's origin.
const hostileOutput = `</pre></details><img src=x onerror="alert(1)"><script>alert(2)</script>` + "\u202e" + `evil`

// fakeTries is a TrySource holding records in memory: a fake, for the
// page's layout and escaping (the daemon's real source is exercised in
// daemon.TestBrowserTryMatrix).
type fakeTries map[string]api.TryRecord

func (f fakeTries) Tries() ([]api.TrySummary, error) {
	var out []api.TrySummary
	for _, r := range f {
		out = append(out, api.TrySummary{ID: r.ID, At: r.At, Study: r.Study, Status: r.Status})
	}
	return out, nil
}

func (f fakeTries) Try(_ context.Context, id string) (api.TryRecord, error) {
	if err := layout.CheckTryID(id); err != nil {
		return api.TryRecord{}, err
	}
	r, ok := f[id]
	if !ok {
		return r, errors.New("not kept")
	}
	return r, nil
}

func runningTry(output string) api.TryRecord {
	return api.TryRecord{ID: "try-0123456789ab", At: time.Now(), Study: "quick", Status: api.TryRunning, Arms: []string{"a", "b"},
		Tasks: map[string][]string{"extract-json": {"t1", "t2"}},
		Trials: []api.TryTrial{{Arm: "a", JobKind: "extract-json", Task: "t1", Outcome: "scored", Graded: true, Pass: true, Score: 1,
			Prompt: "<b>prompt</b>", Output: output, InputTokens: 40, OutputTokens: 12, WallMS: 830}}}
}

// serveTry answers one GET of the tries view on a server whose session
// check is bypassed (the session itself is tested by the daemon's tests).
func serveTry(t *testing.T, src TrySource, path string) (int, string) {
	t.Helper()
	s := &Server{}
	mux := http.NewServeMux()
	s.tryRoutes(mux, src)
	rr := httptest.NewRecorder()
	mux.ServeHTTP(rr, httptest.NewRequest("GET", path, nil))
	return rr.Code, rr.Body.String()
}

// tags counts the page's '<': escaped text has none, so a page whose one
// output is hostile has exactly as many as one whose output is plain text
// cut (or not) the same way.
func tags(t *testing.T, output string) (got, want int) {
	t.Helper()
	rec := runningTry(output)
	_, page := serveTry(t, fakeTries{rec.ID: rec}, "/try/"+rec.ID)
	plain := "ok"
	if _, whole := clip(output); !whole {
		plain = strings.Repeat("x ", clipRunes)
	}
	rec = runningTry(plain)
	_, base := serveTry(t, fakeTries{rec.ID: rec}, "/try/"+rec.ID)
	return strings.Count(page, "<"), strings.Count(base, "<")
}

// The matrix has a row per planned task and a cell per arm from the start:
// the finished trial shows its grade, tokens and latency, the others wait;
// a running try's page reloads itself and a finished one's does not.
func TestTryMatrixFillsInAsTrialsEnd(t *testing.T) {
	rec := runningTry("{\"name\": \"Ada\"}")
	src := fakeTries{rec.ID: rec}
	code, page := serveTry(t, src, "/try/"+rec.ID)
	if code != 200 {
		t.Fatalf("GET /try/%s: %d %s", rec.ID, code, page)
	}
	for _, want := range []string{`data-status="running"`, `http-equiv="refresh"`, "pass 1.00", "40→12 tok", "0.83 s", "waiting", "1 of 4 trials"} {
		if !strings.Contains(page, want) {
			t.Errorf("the running try's page has no %q", want)
		}
	}
	if n := strings.Count(page, `class="cell pending"`); n != 3 {
		t.Errorf("%d pending cells, want 3 (two tasks by two arms, one trial done)", n)
	}
	rec.Status = api.TryDone
	src[rec.ID] = rec
	_, page = serveTry(t, src, "/try/"+rec.ID)
	if strings.Contains(page, `http-equiv="refresh"`) || strings.Contains(page, "waiting") {
		t.Error("a finished try's page still reloads or shows cells waiting")
	}
	if code, _ := serveTry(t, src, "/try/..%2F..%2Fstudies"); code != http.StatusBadRequest {
		t.Errorf("a path-like try id: %d, want 400", code)
	}
	if code, page := serveTry(t, src, "/tries"); code != 200 || !strings.Contains(page, `href="/try/`+rec.ID+`"`) {
		t.Errorf("GET /tries: %d; want a link to the try:\n%s", code, page)
	}
}

// A model's output is text on the page, never markup: the hostile output
// adds no element, short or cut and expandable.
func TestTryMatrixEscapesModelOutput(t *testing.T) {
	for _, out := range []string{hostileOutput, strings.Repeat("x ", 100) + hostileOutput} {
		if got, want := tags(t, out); got != want {
			t.Errorf("output %.40q: the page has %d '<', want %d: the output was not escaped", out, got, want)
		}
		rec := runningTry(out)
		if _, page := serveTry(t, fakeTries{rec.ID: rec}, "/try/"+rec.ID); !strings.Contains(page, "&lt;img src=x onerror=") {
			t.Errorf("output %.40q: the escaped output is not on the page", out)
		}
	}
}

// FuzzTryPageOutput checks that no model output, whatever it holds, adds
// markup to a try's page.
func FuzzTryPageOutput(f *testing.F) {
	f.Add(hostileOutput)
	f.Add("<!--")
	f.Add("<svg><script>x</script></svg>")
	f.Fuzz(func(t *testing.T, out string) {
		if got, want := tags(t, out); got != want {
			t.Errorf("output %q: the page has %d '<', want %d", out, got, want)
		}
	})
}
