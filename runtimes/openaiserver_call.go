package runtimes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxStreamLine caps one server-sent event line of a streamed answer: a
// chunk carries one token and its top-K, far under it.
const maxStreamLine = 1 << 20

// Generate sends one request to the server's chat (or, for a plain
// completion, completions) endpoint with the sampling, stop cap, seed and
// top-K pinned per request, streams the answer, and returns the tokens with
// their log-probabilities, the usage counts and the time to the first token
// and between tokens.
func (s *OpenAIServer) Generate(ctx context.Context, req Request) (Result, error) {
	if req.TopK <= 0 {
		req.TopK = 5
	}
	res := Result{CallID: req.CallID, PeakSource: s.meter.source(), Effort: EffortRecord{Label: req.Effort.Level}}
	if len(req.PromptTokens) > 0 {
		return res, fmt.Errorf("openai-server: a prompt given as token ids is not sent (the OpenAI API takes text); replay regenerates from the text")
	}
	path, body := s.requestBody(req)
	raw, _ := json.Marshal(body)
	res.RenderedPrompt = req.Prompt
	if req.Prompt == "" {
		// No template is applied here: the server applies its own. The
		// record keeps the messages as sent.
		msgs, _ := json.Marshal(req.Messages)
		res.RenderedPrompt = string(msgs)
	}
	peak := s.meter.start()
	start := time.Now()
	st, err := s.stream(ctx, path, raw, start)
	res.Wall = time.Since(start)
	res.PeakMemory = peak.read()
	if err != nil {
		return res, err
	}
	st.fill(&res)
	for i, step := range res.Steps {
		// The completions form's top-K is a map to which llama-cpp-python
		// adds the chosen token when it is not among the K: the record
		// keeps exactly K (the map is ordered by log-probability).
		if len(step.Top) > req.TopK {
			res.Steps[i].Top = step.Top[:req.TopK]
		}
	}
	return res, nil
}

// requestBody is the endpoint and the body of one request: every pin is
// sent, none is left to the server's defaults.
func (s *OpenAIServer) requestBody(req Request) (string, map[string]any) {
	body := map[string]any{
		"model":          s.model,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"max_tokens":     req.MaxTokens,
		"temperature":    req.Sampling.Temperature,
		"top_p":          orOne(req.Sampling.TopP),
		"seed":           req.Sampling.Seed,
		// Not in OpenAI's API; vLLM, SGLang, llama-server and
		// llama-cpp-python read them.
		"top_k": req.Sampling.TopK,
		"min_p": req.Sampling.MinP,
	}
	if len(req.Stop) > 0 {
		body["stop"] = req.Stop
	}
	s.addRequestFields(body)
	if req.Prompt != "" && s.spec.Speaks(APICompletions) {
		body["prompt"] = req.Prompt
		body["logprobs"] = req.TopK
		return "/v1/completions", body
	}
	msgs := req.Messages
	if len(msgs) == 0 {
		msgs = []Message{{Role: "user", Content: req.Prompt}}
	}
	body["messages"] = msgs
	body["logprobs"] = true
	body["top_logprobs"] = req.TopK
	return "/v1/chat/completions", body
}

// addRequestFields adds the spec's request block to a body; the spec's
// Check refused any field rig sets itself, so none is overwritten.
func (s *OpenAIServer) addRequestFields(body map[string]any) {
	for k, v := range s.spec.Request {
		if _, set := body[k]; !set {
			body[k] = v
		}
	}
}

// streamState gathers a streamed answer.
type streamState struct {
	text             strings.Builder
	reasoning        strings.Builder
	steps            []Step
	finish           string
	promptTokens     int
	completionTokens int
	first, last      time.Time
	start            time.Time
}

// chunk is one streamed chunk of either endpoint.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
		Text         string          `json:"text"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// stream posts the request and reads the server-sent events within the
// runtime caps.
func (s *OpenAIServer) stream(ctx context.Context, path string, body []byte, start time.Time) (*streamState, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.sb.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://server"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(hreq)
	if err != nil {
		return nil, s.failed(path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("openai-server %s: %s: %s", path, resp.Status, quote(b))
	}
	st := &streamState{start: start}
	br := bufio.NewReaderSize(io.LimitReader(resp.Body, maxRuntimeResponseBytes), 64<<10)
	for {
		line, err := readStreamLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, s.failed(path, err)
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			break
		}
		if err := st.add([]byte(data)); err != nil {
			return nil, fmt.Errorf("openai-server %s: %w", path, err)
		}
	}
	return st, nil
}

// readStreamLine reads one line, refusing one over maxStreamLine.
func readStreamLine(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		part, isPrefix, err := br.ReadLine()
		if err != nil {
			return "", err
		}
		b.Write(part)
		if b.Len() > maxStreamLine {
			return "", fmt.Errorf("a streamed line over %d bytes (the runtime, in its sandbox, sent more than a token's chunk)", maxStreamLine)
		}
		if !isPrefix {
			return b.String(), nil
		}
	}
}

func (s *OpenAIServer) failed(path string, err error) error {
	if s.sb.exitedWithin(2 * time.Second) {
		return fmt.Errorf("openai-server %s: %w mid-call (%v):\n%s", path, ErrCrashed, s.sb.ExitError(), s.sb.LogTail(5))
	}
	return fmt.Errorf("openai-server %s: %w", path, err)
}

// add folds one chunk in.
func (st *streamState) add(data []byte) error {
	if err := checkJSONShape(data, runtimeAnswerShape, "a streamed chunk of the server (the runtime, in its sandbox)"); err != nil {
		return err
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("a streamed chunk is not a completion chunk: %w", err)
	}
	if c.Usage != nil {
		st.promptTokens, st.completionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	for _, ch := range c.Choices {
		piece := ch.Delta.Content + ch.Text
		steps, err := parseLogprobs(ch.Logprobs)
		if err != nil {
			return err
		}
		if piece != "" || ch.Delta.ReasoningContent != "" || len(steps) > 0 {
			now := time.Now()
			if st.first.IsZero() {
				st.first = now
			}
			st.last = now
		}
		st.text.WriteString(piece)
		st.reasoning.WriteString(ch.Delta.ReasoningContent)
		st.steps = append(st.steps, steps...)
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			st.finish = *ch.FinishReason
		}
	}
	return nil
}

// parseLogprobs reads a chunk's log-probabilities in the chat form
// ({"content": [{token, logprob, bytes, top_logprobs}]}) or the completions
// form ({tokens, token_logprobs, top_logprobs: [{token: logprob}]}).
func parseLogprobs(raw json.RawMessage) ([]Step, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var lp struct {
		Content []struct {
			oaLogprob
			Top []oaLogprob `json:"top_logprobs"`
		} `json:"content"`
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float64            `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	}
	if err := json.Unmarshal(raw, &lp); err != nil {
		return nil, fmt.Errorf("logprobs: %w", err)
	}
	var steps []Step
	for _, c := range lp.Content {
		st := Step{Candidate: oaCandidate(c.oaLogprob)}
		for _, t := range c.Top {
			st.Top = append(st.Top, oaCandidate(t))
		}
		steps = append(steps, st)
	}
	for i, tok := range lp.Tokens {
		st := Step{Candidate: Candidate{ID: -1, Text: tok, Bytes: []byte(tok)}}
		if i < len(lp.TokenLogprobs) {
			st.Logprob = lp.TokenLogprobs[i]
		}
		if i < len(lp.TopLogprobs) {
			st.Top = topOfMap(lp.TopLogprobs[i])
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// topOfMap orders a completions-form top-K by log-probability, ties by text.
func topOfMap(m map[string]float64) []Candidate {
	out := make([]Candidate, 0, len(m))
	for t, l := range m {
		out = append(out, Candidate{ID: -1, Text: t, Bytes: []byte(t), Logprob: l})
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (out[j].Logprob > out[j-1].Logprob || (out[j].Logprob == out[j-1].Logprob && out[j].Text < out[j-1].Text)); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// fill writes the gathered answer into res.
func (st *streamState) fill(res *Result) {
	res.Text, res.Thinking, res.Steps = st.text.String(), st.reasoning.String(), st.steps
	res.PromptTokens, res.OutputTokens = st.promptTokens, st.completionTokens
	if res.OutputTokens == 0 {
		res.OutputTokens = len(st.steps)
	}
	res.LogprobsMissing = max(0, res.OutputTokens-len(res.Steps))
	res.Truncated = st.finish == "length"
	res.StopReason = "stop"
	if res.Truncated {
		res.StopReason = "length"
	}
	if st.first.IsZero() {
		return
	}
	// The time to the first token is the prompt's; the rest is decoding,
	// spread over the tokens after the first.
	res.Timings = Timings{PromptTokens: res.PromptTokens, PromptDuration: st.first.Sub(st.start),
		OutputTokens: res.OutputTokens, OutputDuration: st.last.Sub(st.first)}
	if d := res.Timings.PromptDuration.Seconds(); d > 0 && res.PromptTokens > 0 {
		res.Timings.PromptPerSecond = float64(res.PromptTokens) / d
	}
	if d := res.Timings.OutputDuration.Seconds(); d > 0 && res.OutputTokens > 1 {
		res.Timings.OutputPerSecond = float64(res.OutputTokens-1) / d
	}
}

// call sends one JSON request and decodes the answer, within the caps.
func (s *OpenAIServer) call(ctx context.Context, method, path string, body, out any) error {
	rd, err := jsonBody(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://server"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return s.failed(path, err)
	}
	defer resp.Body.Close()
	return decodeRuntimeAnswer(resp, OpenAIServerKind, path, out)
}
