package runtimes

import (
	"context"
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
	peak := o.meter.start()
	start := time.Now()
	var last api.GenerateResponse
	// The answer comes in pieces from a runtime in its sandbox, as many as it
	// likes: a builder keeps adding them linear (adding to a string copies it
	// whole each time), and the socket's client stops reading at
	// maxRuntimeResponseBytes in all, so the text stays under that too.
	var text strings.Builder
	gctx, trip := withCapTrip(gctx)
	err := o.client.Generate(gctx, gen, func(r api.GenerateResponse) error {
		text.WriteString(r.Response)
		res.Steps = appendOllamaSteps(res.Steps, r.Logprobs)
		last = r
		return nil
	})
	if terr := trip.Err(); terr != nil {
		// The library ends an answer cut at the cap quietly, or with the
		// cut line as its error: the refusal says what happened.
		err = terr
	}
	res.Text = text.String()
	res.Wall = time.Since(start)
	res.PeakMemory = peak.read()
	return o.endCall(res, err, ollamaEnd{Done: last.Done, DoneReason: last.DoneReason, Metrics: last.Metrics}, req, "raw generate")
}
