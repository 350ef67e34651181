package runtimes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// fakeArm is a fake Runtime for the proxy's unit tests: it records each
// request and answers with a fixed text, no model behind it.
type fakeArm struct {
	got []Request
}

func (f *fakeArm) Name() string { return "fake" }
func (f *fakeArm) Generate(_ context.Context, req Request) (Result, error) {
	f.got = append(f.got, req)
	return Result{CallID: req.CallID, Text: "edited", RenderedPrompt: "<|user|>" + req.Messages[len(req.Messages)-1].Content,
		PromptTokens: 7, OutputTokens: 3, Truncated: true, StopReason: "length",
		Steps: []Step{{Candidate: Candidate{ID: 1, Text: "ed", Logprob: -0.5}}}}, nil
}
func (f *fakeArm) Pins() Pins                 { return Pins{} }
func (f *fakeArm) Endpoint() string           { return "" }
func (f *fakeArm) Sandbox() *Sandbox          { return nil }
func (f *fakeArm) Stop(context.Context) error { return nil }

func proxyClient(t *testing.T, arm Runtime, caps AiderCaps) (*recordingProxy, func(method, path, body string) (int, map[string]any)) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "p.sock")
	p, err := newRecordingProxy(sock, arm, Sampling{Temperature: 0.2, TopK: 40, TopP: 0.9, MinP: 0.05, Seed: 42}, 96, 5, caps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	c := socketClient(sock)
	return p, func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %s", method, path, raw)
		}
		return resp.StatusCode, out
	}
}

func TestProxyAnswersThroughTheArmUnderItsPins(t *testing.T) {
	arm := &fakeArm{}
	p, call := proxyClient(t, arm, AiderCaps{Turns: 2})
	status, out := call("POST", "/v1/chat/completions", `{"model":"openai/rig-arm","temperature":1.5,"max_tokens":4000,"stop":"###",
		"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"fix "},{"type":"text","text":"calc.py"}]}]}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	if len(arm.got) != 1 {
		t.Fatalf("the arm got %d calls, want 1", len(arm.got))
	}
	req := arm.got[0]
	if req.Sampling.Temperature != 0.2 || req.Sampling.TopK != 40 || req.Sampling.MinP != 0.05 || req.Sampling.Seed != 42 {
		t.Errorf("Aider's temperature reached the arm, or a pin was lost: %+v", req.Sampling)
	}
	if req.MaxTokens != 96 || req.TopK != 5 {
		t.Errorf("stop cap %d, top-K %d; want the arm's 96 and 5", req.MaxTokens, req.TopK)
	}
	if len(req.Messages) != 2 || req.Messages[1].Content != "fix calc.py" || len(req.Stop) != 1 || req.Stop[0] != "###" {
		t.Errorf("messages or stop not carried: %+v stop %v", req.Messages, req.Stop)
	}
	choice := out["choices"].([]any)[0].(map[string]any)
	if choice["message"].(map[string]any)["content"] != "edited" || choice["finish_reason"] != "length" {
		t.Errorf("answer %v", choice)
	}
	if out["usage"].(map[string]any)["completion_tokens"].(float64) != 3 {
		t.Errorf("usage %v", out["usage"])
	}
	calls, total, hit := p.results()
	if len(calls) != 1 || calls[0].CallID != "aider-call-1" || calls[0].RenderedPrompt != "<|user|>fix calc.py" || total != 3 || hit != "" {
		t.Errorf("kept %+v, total %d, cap %q", calls, total, hit)
	}
}

func TestProxyStopsAtTheTurnCap(t *testing.T) {
	arm := &fakeArm{}
	p, call := proxyClient(t, arm, AiderCaps{Turns: 1})
	body := `{"messages":[{"role":"user","content":"go"}]}`
	if status, out := call("POST", "/v1/chat/completions", body); status != 200 {
		t.Fatalf("first call: %d %v", status, out)
	}
	status, out := call("POST", "/v1/chat/completions", body)
	// Not a 429 or a 5xx: Aider retries those, and a cap does not lift.
	if status != http.StatusBadRequest || !strings.Contains(out["error"].(map[string]any)["message"].(string), "turns cap") {
		t.Errorf("second call: %d %v, want 400 naming the turns cap", status, out)
	}
	if _, _, hit := p.results(); hit != "turns" || len(arm.got) != 1 {
		t.Errorf("cap %q, arm calls %d", hit, len(arm.got))
	}
}

func TestProxyRefusesWhatTheRecordCannotHold(t *testing.T) {
	arm := &fakeArm{}
	_, call := proxyClient(t, arm, AiderCaps{})
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}`, "tool calls"},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":2}`, "n > 1"},
		{"POST", "/v1/chat/completions", `{"messages":[]}`, "no messages"},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":7}]}`, "messages[0].content"},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stop":7}`, "stop"},
		{"POST", "/v1/completions", `{}`, "not served"},
	} {
		status, out := call(c.method, c.path, c.body)
		msg, _ := out["error"].(map[string]any)["message"].(string)
		if status < 400 || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: %d %q, want an error naming %q", c.path, c.body, status, msg, c.want)
		}
	}
	if len(arm.got) != 0 {
		t.Errorf("a refused call reached the arm: %+v", arm.got)
	}
	if status, out := call("GET", "/v1/models", ""); status != 200 || out["object"] != "list" {
		t.Errorf("models: %d %v", status, out)
	}
}

// FuzzParseChatRequest feeds the reader of kept chat requests (replay reads
// them back from generation records) arbitrary bytes: it must not panic, and
// what it accepts has at least one message.
func FuzzParseChatRequest(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"stop":["a"]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":"b"}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":null}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, msgs, _, err := parseChatRequest(body)
		if err == nil && len(msgs) == 0 {
			t.Errorf("accepted %q with no messages", body)
		}
	})
}

// failingArm answers its first call and fails the rest, as a runtime that
// refuses a prompt would.
type failingArm struct{ fakeArm }

func (f *failingArm) Generate(ctx context.Context, req Request) (Result, error) {
	if len(f.got) == 0 {
		return f.fakeArm.Generate(ctx, req)
	}
	f.got = append(f.got, req)
	return Result{}, errors.New("llama-server: HTTP 400: the request exceeds the available context size")
}

// A call the arm does not answer is refused to Aider in a way it does not
// retry (a retry sends the same request, which fails the same way), the
// answered call before it stays kept, and the failure is kept with its reason.
func TestProxyKeepsAnsweredCallsAndNamesAFailedOne(t *testing.T) {
	arm := &failingArm{}
	p, call := proxyClient(t, arm, AiderCaps{Turns: 3})
	body := `{"messages":[{"role":"user","content":"go"}]}`
	if status, out := call("POST", "/v1/chat/completions", body); status != 200 {
		t.Fatalf("first call: %d %v", status, out)
	}
	status, out := call("POST", "/v1/chat/completions", body)
	if status != http.StatusBadRequest || !strings.Contains(out["error"].(map[string]any)["message"].(string), "context size") {
		t.Errorf("failed call: %d %v, want 400 with the runtime's reason", status, out)
	}
	calls, _, _ := p.results()
	if len(calls) != 1 || calls[0].CallID != "aider-call-1" {
		t.Errorf("kept %d calls, want the one answered", len(calls))
	}
	if f := p.failed(); len(f) != 1 || !strings.Contains(f[0], "call 2") || !strings.Contains(f[0], "context size") {
		t.Errorf("failures %q, want call 2 with its reason", f)
	}
}

// An Aider run on an arm's slot (AiderConfig.Slot) asks for that slot on
// every call, so N runs in flight keep to their own; without one the
// server picks.
func TestProxyAsksForTheRunsSlot(t *testing.T) {
	for _, slot := range []int{0, 2} {
		arm := &fakeArm{}
		p, call := proxyClient(t, arm, AiderCaps{Turns: 3})
		p.serverSlot = slot
		for range 2 {
			if status, out := call("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"fix"}]}`); status != 200 {
				t.Fatalf("status %d: %v", status, out)
			}
		}
		for i, req := range arm.got {
			if req.Slot != slot {
				t.Errorf("run on slot %d: call %d asked for slot %d", slot, i+1, req.Slot)
			}
		}
	}
}
