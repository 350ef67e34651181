package runtimes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ollama/ollama/api"
)

// Speed sends one call as llama-bench measures one: a raw prompt (no chat
// template, the model's BOS added by its tokenizer), greedy, no prompt
// cache, no log-probabilities, at most maxTokens out. The result carries
// the runtime's own timings, the wall time and the peak memory of the
// call; rig bench runtimes sends the same call to every runtime.
func (s *LlamaServer) Speed(ctx context.Context, prompt string, maxTokens int) (Result, error) {
	res := Result{RenderedPrompt: prompt, PeakSource: s.meter.source()}
	body := map[string]any{
		"prompt": prompt, "n_predict": maxTokens, "cache_prompt": false, "stream": false,
		"temperature": 0, "seed": 0, "samplers": []string{"top_k", "top_p", "min_p", "temperature"},
	}
	peak := s.meter.start()
	start := time.Now()
	var out lsCompletion
	err := s.call(ctx, "POST", "/completion", body, &out)
	res.Wall = time.Since(start)
	res.PeakMemory = peak.read()
	if err != nil {
		return res, err
	}
	res.Text, res.PromptTokens, res.OutputTokens = out.Content, out.Timings.PromptN, out.TokensPredicted
	res.Truncated = out.StopType == "limit"
	res.Timings = Timings{
		PromptTokens: out.Timings.PromptN, PromptDuration: msDur(out.Timings.PromptMS), PromptPerSecond: out.Timings.PromptPerS,
		OutputTokens: out.Timings.PredictedN, OutputDuration: msDur(out.Timings.PredictedMS), OutputPerSecond: out.Timings.PredPerS,
	}
	return res, nil
}

// Speed sends the call LlamaServer.Speed sends, through Ollama's raw
// generate (no template), with the runner options every call carries so
// the loaded runner serves it without loading again.
func (o *Ollama) Speed(ctx context.Context, prompt string, maxTokens int) (Result, error) {
	gctx, cancel := o.guard(ctx)
	defer cancel()
	stream := false
	req := &api.GenerateRequest{Model: o.model, Prompt: prompt, Raw: true, Stream: &stream,
		Options: o.options(Request{Sampling: Sampling{Temperature: 0}, MaxTokens: maxTokens})}
	res := Result{RenderedPrompt: prompt, PeakSource: o.meter.source()}
	var last api.GenerateResponse
	peak := o.meter.start()
	start := time.Now()
	err := o.client.Generate(gctx, req, func(r api.GenerateResponse) error {
		res.Text += r.Response
		last = r
		return nil
	})
	res.Wall = time.Since(start)
	res.PeakMemory = peak.read()
	if err != nil {
		if o.exited() {
			return res, o.crashed("mid-call")
		}
		return res, fmt.Errorf("ollama: raw generate: %w", err)
	}
	if !last.Done {
		return res, errors.New("ollama: raw generate ended without its final message (no timings)")
	}
	res.PromptTokens, res.OutputTokens = last.PromptEvalCount, last.EvalCount
	res.Truncated = last.DoneReason == "length"
	res.Timings = Timings{
		PromptTokens: last.PromptEvalCount, PromptDuration: last.PromptEvalDuration,
		OutputTokens: last.EvalCount, OutputDuration: last.EvalDuration, LoadDuration: last.LoadDuration,
		PromptPerSecond: perSecond(last.PromptEvalCount, last.PromptEvalDuration),
		OutputPerSecond: perSecond(last.EvalCount, last.EvalDuration),
	}
	return res, nil
}
