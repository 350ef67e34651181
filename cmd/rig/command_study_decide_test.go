package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rig/api"
)

// fakeDaemon answers decide and amend-decision on a unix socket as the
// daemon would, any other method with what a test gave it (answer; zero
// without), and keeps every request it was sent.
type fakeDaemon struct {
	socket string
	mu     sync.Mutex
	calls  []string // method, and "+preview" for a preview
	// replies answers the other methods, for other commands' tests (answer);
	// bodies keeps the last request sent to each method (request).
	replies map[string]any
	bodies  map[string][]byte
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	fd := &fakeDaemon{socket: filepath.Join(t.TempDir(), "rig.sock"), replies: map[string]any{}, bodies: map[string][]byte{}}
	l, err := net.Listen("unix", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Study     string `json:"study"`
			Rationale string `json:"rationale"`
			Preview   bool   `json:"preview"`
		}
		json.Unmarshal(body, &req)
		method := strings.TrimPrefix(r.URL.Path, "/")
		fd.mu.Lock()
		fd.calls = append(fd.calls, method+map[bool]string{true: "+preview"}[req.Preview])
		fd.bodies[method] = body
		canned := fd.replies[method]
		fd.mu.Unlock()
		var result any
		switch method {
		default:
			result = canned
		case api.MethodDecide:
			result = api.DecisionRecord{Study: req.Study, Execution: "exec-1", Action: "ship gemma", Verdict: "ship", Arm: "gemma", NextBaseline: "gemma",
				Trace: []string{"clause 1 holds"}, ComparisonHash: "c976", Rationale: req.Rationale, Actor: "dana (uid 1001)", At: at, Preview: req.Preview}
		case api.MethodAmendDecision:
			result = api.DecisionAmendment{Study: req.Study, Seq: 1, Execution: "exec-1", DecidedAt: at, Rationale: req.Rationale, Actor: "dana (uid 1001)", At: at.Add(time.Hour), Preview: req.Preview}
		}
		raw, _ := json.Marshal(result)
		json.NewEncoder(w).Encode(api.Reply{Result: raw})
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return fd
}

// answer has the fake answer method with result.
func (fd *fakeDaemon) answer(method string, result any) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	fd.replies[method] = result
}

// request decodes into v the last request method was sent, and fails the
// test when it was sent none.
func (fd *fakeDaemon) request(t *testing.T, method string, v any) {
	t.Helper()
	fd.mu.Lock()
	body, ok := fd.bodies[method]
	fd.mu.Unlock()
	if !ok {
		t.Fatalf("the fake daemon was sent no %s request", method)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s request %s: %v", method, body, err)
	}
}

func (fd *fakeDaemon) sent() []string {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	return append([]string(nil), fd.calls...)
}

// rigWithInput runs rig in-process with stdin reading input (a reader, so
// never a terminal).
func rigWithInput(t *testing.T, input string, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetIn(strings.NewReader(input))
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// Without a terminal to ask on, decide refuses unless --yes, and sends the
// daemon nothing; even a "y" piped in is no answer. With --yes it records
// at once, without a preview.
func TestStudyDecideAsksOrNeedsYes(t *testing.T) {
	fd := newFakeDaemon(t)
	args := []string{"study", "decide", "s1", "--comparison", "c976", "--rationale", "the rule says ship", "--socket", fd.socket}
	out, err := rigWithInput(t, "y\n", args...)
	if err == nil || !strings.Contains(err.Error(), "add --yes") || !strings.Contains(err.Error(), "not a terminal") || !strings.Contains(err.Error(), "nothing was recorded") {
		t.Errorf("decide with stdin a pipe = %v (printed %q); want a refusal naming --yes", err, out)
	}
	if calls := fd.sent(); len(calls) != 0 {
		t.Errorf("the refused decide sent %v to the daemon", calls)
	}
	out, err = rigWithInput(t, "", append(args, "--yes")...)
	if err != nil {
		t.Fatal(err)
	}
	if calls := fd.sent(); strings.Join(calls, " ") != "decide" {
		t.Errorf("decide --yes sent %v; want one decide, no preview", calls)
	}
	if !strings.Contains(out, "decision   ship gemma (ship)") || !strings.Contains(out, "recorded by dana (uid 1001)") {
		t.Errorf("decide --yes printed:\n%s", out)
	}
}

// The preview lists every field a decision records.
func TestDecisionPreviewShowsEveryField(t *testing.T) {
	var b bytes.Buffer
	rec := api.DecisionRecord{Study: "s1", Execution: "exec-1", Action: "ship gemma", Verdict: "ship", Arm: "gemma", NextBaseline: "gemma",
		Trace: []string{"clause 1 holds"}, ComparisonHash: "c9761c62df62", Rationale: "gemma is faster", Actor: "dana (uid 1001)", Preview: true}
	printDecisionPreview(&b, rec)
	for _, want := range []string{"study          s1", "execution      exec-1", "outcome        ship gemma (ship)", "winner         gemma",
		"next baseline  gemma", "rationale      gemma is faster", "comparison     c9761c62df62", "actor          dana (uid 1001)", "clause 1 holds"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the preview lacks %q:\n%s", want, b.String())
		}
	}
}

// Only y or yes is yes; anything else, an empty line or no line, is no.
func TestAskTakesOnlyYes(t *testing.T) {
	for input, want := range map[string]bool{"y\n": true, "YES\n": true, " yes \n": true, "y": true, "\n": false, "": false, "n\n": false, "yep\n": false} {
		cmd := studyDecideCommand()
		var out bytes.Buffer
		cmd.SetIn(strings.NewReader(input))
		cmd.SetOut(&out)
		got, err := ask(cmd, "Record this decision?")
		if err != nil || got != want {
			t.Errorf("answer %q: %v, %v; want %v", input, got, err, want)
		}
		if out.String() != "Record this decision? [y/N] " {
			t.Errorf("prompt %q", out.String())
		}
	}
}
