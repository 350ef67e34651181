package runtimes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// oaResponse is an OpenAI-style chat completion with log-probabilities, as
// Ollama's compatible endpoint answers it.
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

type oaLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func oaCandidate(l oaLogprob) Candidate {
	b := make([]byte, len(l.Bytes))
	for i, v := range l.Bytes {
		b[i] = byte(v)
	}
	return Candidate{ID: -1, Text: l.Token, Bytes: b, Logprob: l.Logprob}
}

// OpenAIChat sends a kept OpenAI-style chat request, as it is, to Ollama's
// compatible endpoint and reads the answer with its log-probabilities. Replay
// uses it for harness calls kept before the proxy answered through the driver:
// those calls went to this endpoint, with its defaults for every option the
// request could not name, so this is where they regenerate the same way.
func (o *Ollama) OpenAIChat(ctx context.Context, body []byte) (Result, error) {
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		return Result{}, fmt.Errorf("ollama: the kept chat request is not JSON: %w", err)
	}
	req["model"], req["stream"] = o.model, false
	body, _ = json.Marshal(req)
	gctx, cancel := o.guard(ctx)
	defer cancel()
	hreq, err := http.NewRequestWithContext(gctx, http.MethodPost, "http://127.0.0.1/v1/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return Result{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := socketClient(o.sock).Do(hreq)
	if err != nil {
		if o.exited() {
			return Result{}, o.crashed("mid-call")
		}
		return Result{}, fmt.Errorf("ollama: chat completions: %w", err)
	}
	defer resp.Body.Close()
	// Ollama runs in the sandbox: its answer is read and decoded only within
	// the caps (see maxRuntimeResponseBytes); past them the call fails.
	const what = "the answer of ollama /v1/chat/completions (the runtime, in its sandbox)"
	if resp.ContentLength > maxRuntimeResponseBytes {
		return Result{}, fmt.Errorf("ollama: chat completions: %w (it said %d bytes)", tooLarge(what, maxRuntimeResponseBytes, "bytes", "maxRuntimeResponseBytes"), resp.ContentLength)
	}
	raw, err := readCapped(resp.Body, resp.ContentLength, maxRuntimeResponseBytes, "maxRuntimeResponseBytes", what)
	if err != nil {
		return Result{}, fmt.Errorf("ollama: chat completions: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("ollama: chat completions: %s: %s", resp.Status, quote(raw))
	}
	if err := checkJSONShape(raw, runtimeAnswerShape, what); err != nil {
		return Result{}, fmt.Errorf("ollama: chat completions: %w", err)
	}
	var out oaResponse
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		return Result{}, fmt.Errorf("ollama: chat completions: an answer with no choice: %.200s", raw)
	}
	c := out.Choices[0]
	res := Result{Text: c.Message.Content, Thinking: c.Message.ReasoningContent, RenderedPrompt: string(body),
		PromptTokens: out.Usage.PromptTokens, OutputTokens: out.Usage.CompletionTokens, Wall: time.Since(start),
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
	if res.OutputTokens == 0 {
		res.OutputTokens = len(res.Steps)
	}
	res.LogprobsMissing = max(0, res.OutputTokens-len(res.Steps))
	return res, nil
}
