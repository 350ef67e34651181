package runtimes

import (
	"context"
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
	peak := o.meter.start()
	start := time.Now()
	var last api.GenerateResponse
	err := o.client.Generate(gctx, gen, func(r api.GenerateResponse) error {
		res.Text += r.Response
		res.Steps = appendOllamaSteps(res.Steps, r.Logprobs)
		last = r
		return nil
	})
	res.Wall = time.Since(start)
	res.PeakMemory = peak.read()
	return o.endCall(res, err, ollamaEnd{Done: last.Done, DoneReason: last.DoneReason, Metrics: last.Metrics}, req, "raw generate")
}
