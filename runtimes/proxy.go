package runtimes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// recordingProxy sits between Aider and the arm's server. It forwards Aider's
// OpenAI-compatible calls to the arm's unix socket, holds them to the arm's
// pins (sampling, seed, stop cap, log-probabilities with top-K), counts turns
// and tokens against the caps, and keeps every call for the generation record.
// Aider itself cannot be trusted to send the pins, and without the proxy its
// model calls would leave no evidence.
type recordingProxy struct {
	upstream *http.Client
	model    string // the name the arm's server knows its model by
	sampling Sampling
	maxTok   int // per-call stop cap
	topK     int
	caps     AiderCaps

	mu          sync.Mutex
	calls       []Result
	outputTotal int
	capHit      string
	srv         *http.Server
	l           net.Listener
}

func newRecordingProxy(socket, upstreamSocket, model string, s Sampling, maxTok, topK int, caps AiderCaps) (*recordingProxy, error) {
	if err := claimSocket(socket); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(socket, 0o600)
	p := &recordingProxy{upstream: socketClient(upstreamSocket), model: model, sampling: s, maxTok: maxTok, topK: topK, caps: caps, l: l}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(l)
	return p, nil
}

func (p *recordingProxy) close() { p.srv.Close() }

type oaLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
	ID      *int    `json:"id,omitempty"`
}

type oaResponse struct {
	Choices []struct {
		Message struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		Logprobs     *struct {
			Content []struct {
				oaLogprob
				Top []oaLogprob `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	isChat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	if isChat {
		p.mu.Lock()
		turns := len(p.calls)
		hit := p.capHit
		p.mu.Unlock()
		if hit == "" && p.caps.Turns > 0 && turns >= p.caps.Turns {
			hit = "turns"
		}
		if hit != "" {
			p.mu.Lock()
			p.capHit = hit
			p.mu.Unlock()
			http.Error(w, `{"error":{"message":"rig: the `+hit+` cap of this run is reached"}}`, http.StatusTooManyRequests)
			return
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err == nil {
			req["stream"] = false
			if p.model != "" {
				req["model"] = p.model
			}
			req["logprobs"] = true
			req["top_logprobs"] = p.topK
			req["temperature"] = p.sampling.Temperature
			req["top_p"] = orOne(p.sampling.TopP)
			req["seed"] = p.sampling.Seed
			if p.maxTok > 0 {
				req["max_tokens"] = p.maxTok
			}
			body, _ = json.Marshal(req)
		}
	}
	// Runtimes refuse a Host that is not a loopback name; the socket leads to
	// their loopback port, so the request says so.
	up, err := http.NewRequestWithContext(r.Context(), r.Method, "http://127.0.0.1"+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.Header = r.Header.Clone()
	up.Header.Del("Authorization")
	start := time.Now()
	resp, err := p.upstream.Do(up)
	if err != nil {
		http.Error(w, "rig proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if isChat && resp.StatusCode == 200 {
		p.record(body, out, time.Since(start))
	}
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

func (p *recordingProxy) record(reqBody, respBody []byte, wall time.Duration) {
	var resp oaResponse
	if json.Unmarshal(respBody, &resp) != nil || len(resp.Choices) == 0 {
		return
	}
	c := resp.Choices[0]
	res := Result{Text: c.Message.Content, Thinking: c.Message.ReasoningContent, RenderedPrompt: string(reqBody),
		PromptTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens, Wall: wall,
		StopReason: "stop", Truncated: c.FinishReason == "length"}
	if res.Truncated {
		res.StopReason = "length"
	}
	if c.Logprobs != nil {
		for _, lp := range c.Logprobs.Content {
			st := Step{Candidate: oaCandidate(lp.oaLogprob)}
			for _, t := range lp.Top {
				st.Top = append(st.Top, oaCandidate(t))
			}
			res.Steps = append(res.Steps, st)
		}
	}
	if res.OutputTokens == 0 && len(res.Steps) > 0 {
		// Ollama's OpenAI-compatible endpoint can answer without a usage
		// count; the log-prob steps are then the only count there is.
		res.OutputTokens = len(res.Steps)
	}
	res.LogprobsMissing = max(0, res.OutputTokens-len(res.Steps))
	p.mu.Lock()
	defer p.mu.Unlock()
	res.CallID = fmt.Sprintf("aider-call-%d", len(p.calls)+1)
	p.calls = append(p.calls, res)
	p.outputTotal += res.OutputTokens
	if p.caps.Tokens > 0 && p.outputTotal >= p.caps.Tokens && p.capHit == "" {
		p.capHit = "tokens"
	}
}

func oaCandidate(l oaLogprob) Candidate {
	b := make([]byte, len(l.Bytes))
	for i, v := range l.Bytes {
		b[i] = byte(v)
	}
	id := -1
	if l.ID != nil {
		id = *l.ID
	}
	return Candidate{ID: id, Text: l.Token, Bytes: b, Logprob: l.Logprob}
}

func (p *recordingProxy) results() ([]Result, int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Result(nil), p.calls...), p.outputTotal, p.capHit
}
