package runtimes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// recordingProxy is the only model server Aider sees. It answers Aider's
// OpenAI-style chat calls through the arm's own driver, so each call is made
// under the arm's full pins (sampling, seed, stop cap, top-K log-probabilities)
// exactly as rig's own calls are, and is kept with the prompt the template
// rendered (and its token ids where the runtime gives them). A replay then
// re-scores an Aider call the same way as any other row. Aider itself cannot be
// trusted to send the pins, and an OpenAI-compatible endpoint cannot take them
// all (Ollama's has no top_k, min_p or repeat_penalty), so nothing is forwarded
// to one. The proxy also counts turns and tokens against the caps.
type recordingProxy struct {
	arm      Runtime
	sampling Sampling
	maxTok   int // per-call stop cap
	topK     int
	caps     AiderCaps

	mu          sync.Mutex
	calls       []Result
	failures    []string // calls the arm did not answer, with why
	outputTotal int
	capHit      string
	srv         *http.Server
	l           net.Listener
}

func newRecordingProxy(socket string, arm Runtime, s Sampling, maxTok, topK int, caps AiderCaps) (*recordingProxy, error) {
	if err := claimSocket(socket); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(socket, 0o600)
	p := &recordingProxy{arm: arm, sampling: s, maxTok: maxTok, topK: topK, caps: caps, l: l}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(l)
	return p, nil
}

func (p *recordingProxy) close() { p.srv.Close() }

// proxyDefaultMaxTokens bounds a call when neither the arm nor Aider names a cap.
const proxyDefaultMaxTokens = 1024

// oaChatRequest is the part of an OpenAI-style chat request the proxy reads.
type oaChatRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens int             `json:"max_tokens"`
	Stop      json.RawMessage `json:"stop"`
	Tools     []any           `json:"tools"`
	N         int             `json:"n"`
}

// parseChatRequest reads the messages and stop strings of an OpenAI-style chat
// request; content given as parts keeps its text parts in order.
func parseChatRequest(body []byte) (oaChatRequest, []Message, []string, error) {
	var req oaChatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, nil, fmt.Errorf("not a JSON chat request: %w", err)
	}
	if len(req.Messages) == 0 {
		return req, nil, nil, errors.New("a chat request with no messages")
	}
	msgs := make([]Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		var text string
		if len(m.Content) > 0 && string(m.Content) != "null" && json.Unmarshal(m.Content, &text) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return req, nil, nil, fmt.Errorf("messages[%d].content is neither text nor a list of parts", i)
			}
			for _, part := range parts {
				text += part.Text
			}
		}
		msgs = append(msgs, Message{Role: m.Role, Content: text})
	}
	var stop []string
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if json.Unmarshal(req.Stop, &one) == nil {
			stop = []string{one}
		} else if err := json.Unmarshal(req.Stop, &stop); err != nil {
			return req, nil, nil, errors.New("stop is neither a string nor a list of strings")
		}
	}
	return req, msgs, stop, nil
}

// ChatMessages reads the messages of a kept OpenAI-style chat request (how
// harness calls were kept before the proxy answered through the driver).
func ChatMessages(body string) ([]Message, error) {
	_, msgs, _, err := parseChatRequest([]byte(body))
	return msgs, err
}

func oaError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "rig: " + msg, "type": "rig_proxy"}})
	w.Write(b)
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"rig-arm","object":"model","owned_by":"rig"}]}`))
		return
	case r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions"):
		oaError(w, http.StatusNotFound, r.Method+" "+r.URL.Path+" is not served; the arm answers chat completions only")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		oaError(w, http.StatusBadRequest, err.Error())
		return
	}
	req, msgs, stop, err := parseChatRequest(body)
	if err != nil {
		oaError(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(req.Tools) > 0 || req.N > 1 {
		// Tool calls and several choices have no place in the record's one
		// output per call; an edit format that needs them is refused aloud.
		oaError(w, http.StatusBadRequest, "tool calls and n > 1 are not supported; use a text edit format (whole, diff)")
		return
	}
	p.mu.Lock()
	n := len(p.calls) + 1
	if p.capHit == "" && p.caps.Turns > 0 && n > p.caps.Turns {
		p.capHit = "turns"
	}
	hit := p.capHit
	p.mu.Unlock()
	if hit != "" {
		// 400, not 429: Aider retries a rate limit for a minute or more,
		// and a cap is not lifted by waiting.
		oaError(w, http.StatusBadRequest, "the "+hit+" cap of this run is reached")
		return
	}
	maxTok := p.maxTok
	if maxTok <= 0 {
		maxTok = req.MaxTokens
	}
	if maxTok <= 0 {
		maxTok = proxyDefaultMaxTokens
	}
	res, err := p.arm.Generate(r.Context(), Request{CallID: fmt.Sprintf("aider-call-%d", n), Messages: msgs,
		Sampling: p.sampling, MaxTokens: maxTok, TopK: p.topK, Stop: stop})
	if err != nil && r.Context().Err() != nil {
		// Aider went away mid-call (the wall cap stopped it): a cut call,
		// not one the arm failed; the cap is what the result reports.
		oaError(w, http.StatusBadRequest, "the run ended during this call")
		return
	}
	if err != nil {
		// Kept with the result, so the trial or validation says why the
		// call has no record. 400 because Aider retries a 5xx with the same
		// request, which the pinned runtime answers the same way again.
		p.fail(n, err)
		oaError(w, http.StatusBadRequest, "the arm did not answer: "+err.Error())
		return
	}
	p.keep(res)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(oaCompletion(res, n))
}

// oaCompletion is the OpenAI-style answer Aider reads.
func oaCompletion(res Result, n int) map[string]any {
	finish := "stop"
	if res.Truncated {
		finish = "length"
	}
	msg := map[string]any{"role": "assistant", "content": res.Text}
	if res.Thinking != "" {
		msg["reasoning_content"] = res.Thinking
	}
	return map[string]any{
		"id": fmt.Sprintf("rig-aider-call-%d", n), "object": "chat.completion", "created": time.Now().Unix(), "model": "rig-arm",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": res.PromptTokens, "completion_tokens": res.OutputTokens,
			"total_tokens": res.PromptTokens + res.OutputTokens},
	}
}

func (p *recordingProxy) keep(res Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, res)
	p.outputTotal += res.OutputTokens
	if p.caps.Tokens > 0 && p.outputTotal >= p.caps.Tokens && p.capHit == "" {
		p.capHit = "tokens"
	}
}

func (p *recordingProxy) fail(n int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, fmt.Sprintf("call %d: %v", n, err))
}

func (p *recordingProxy) failed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.failures...)
}

func (p *recordingProxy) results() ([]Result, int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Result(nil), p.calls...), p.outputTotal, p.capHit
}
