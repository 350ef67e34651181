package runtimes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ollama/ollama/api"
)

// A Request with Prompt set is a plain completion: the text goes to the
// model as it is, with no chat template, the way a pretrained base model was
// trained to be prompted (an arm with prompt_format "completion").
// llama-server tokenizes it with the model's own tokenizer (BOS added) and
// sends the ids to /completion as for any call; Ollama sends it with raw
// set, which skips its template.

// completionOllama is Ollama's Generate for a Request with Prompt set: the
// same bookkeeping as a chat call, through /api/generate with raw true.
func (o *Ollama) completionOllama(ctx context.Context, req Request) (Result, error) {
	res := Result{CallID: req.CallID, RenderedPrompt: req.Prompt, PeakSource: o.meter.source()}
	res.Effort, _ = o.effortFor(Effort{})
	gctx, cancel := o.guard(ctx)
	defer cancel()
	stream, off := false, false
	// As for chat: a prompt longer than the context is refused, never
	// truncated or shifted.
	gen := &api.GenerateRequest{Model: o.model, Prompt: req.Prompt, Raw: true, Stream: &stream, Options: o.options(req),
		Logprobs: true, TopLogprobs: req.TopK, Truncate: &off, Shift: &off}
	o.meter.reset()
	start := time.Now()
	var last api.GenerateResponse
	err := o.client.Generate(gctx, gen, func(r api.GenerateResponse) error {
		res.Text += r.Response
		for _, lp := range r.Logprobs {
			st := Step{Candidate: ollamaCandidate(lp.TokenLogprob)}
			for _, t := range lp.TopLogprobs {
				st.Top = append(st.Top, ollamaCandidate(t))
			}
			res.Steps = append(res.Steps, st)
		}
		last = r
		return nil
	})
	res.Wall = time.Since(start)
	res.PeakMemory = o.meter.read()
	if err != nil {
		if o.exited() {
			return res, o.crashed("mid-call")
		}
		if strings.Contains(err.Error(), "exceeds the context length") {
			return res, fmt.Errorf("%w: Ollama refused the prompt as longer than the pinned context of %d (truncation off): %v", ErrPromptTooLong, o.cfg.Context, err)
		}
		var se api.StatusError
		if errors.As(err, &se) && se.StatusCode == http.StatusNotFound {
			return res, fmt.Errorf("ollama: model %s vanished from the private store: %w", o.model, err)
		}
		return res, fmt.Errorf("ollama: raw generate: %w", err)
	}
	if !last.Done && ollamaRepeatLimit(res.Steps) {
		res.OutputTokens = len(res.Steps)
		res.Truncated, res.StopReason = true, "repeat_limit"
		return res, nil
	}
	if !last.Done {
		return res, fmt.Errorf("ollama: raw generate answer ended without its final message (%d steps, %d characters, done_reason %q)", len(res.Steps), len(res.Text), last.DoneReason)
	}
	res.PromptTokens, res.OutputTokens = last.PromptEvalCount, last.EvalCount
	if o.cfg.Context > 0 && res.PromptTokens+req.MaxTokens > o.cfg.Context {
		return res, promptTooLong(res.PromptTokens, req.MaxTokens, o.cfg.Context, "counted by Ollama's own tokenizer as it evaluated the prompt")
	}
	res.LogprobsMissing = max(0, res.OutputTokens-len(res.Steps))
	res.Truncated = last.DoneReason == "length"
	res.StopReason = "stop"
	if res.Truncated {
		res.StopReason = "length"
	}
	res.Timings = Timings{
		PromptTokens: last.PromptEvalCount, PromptDuration: last.PromptEvalDuration,
		OutputTokens: last.EvalCount, OutputDuration: last.EvalDuration, LoadDuration: last.LoadDuration,
		PromptPerSecond: perSecond(last.PromptEvalCount, last.PromptEvalDuration),
		OutputPerSecond: perSecond(last.EvalCount, last.EvalDuration),
	}
	return res, nil
}
