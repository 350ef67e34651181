package runtimes

import (
	"context"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
)

// BenchmarkDriverOverhead sends the same generation through the driver and
// straight to the runtime (same socket, no driver logic), paired and
// interleaved in random order within one run, and reports the median of the
// per-pair ratios driver/direct. Goal: at most 1.02.
//
//	go test -run '^$' -bench DriverOverhead -benchtime 20x ./runtimes/
func BenchmarkDriverOverhead(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			rt := startReal(b, kind, "smollm2-135m-instruct")
			ctx := context.Background()
			req := Request{CallID: "bench", Messages: []Message{{Role: "user", Content: "List four fruits, one per line."}},
				Sampling: Sampling{Temperature: 0, Seed: 1}, MaxTokens: 32, TopK: 5}
			// Warm both paths once.
			first, err := rt.Generate(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			direct := directCall(b, rt, req, first)
			direct()
			rng := rand.New(rand.NewSource(1))
			var ratios []float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var viaDriver, straight time.Duration
				run := []func(){
					func() {
						t0 := time.Now()
						if _, err := rt.Generate(ctx, req); err != nil {
							b.Fatal(err)
						}
						viaDriver = time.Since(t0)
					},
					func() { straight = direct() },
				}
				rng.Shuffle(2, func(i, j int) { run[i], run[j] = run[j], run[i] })
				run[0]()
				run[1]()
				ratios = append(ratios, float64(viaDriver)/float64(straight))
			}
			b.StopTimer()
			sort.Float64s(ratios)
			med := ratios[len(ratios)/2]
			b.ReportMetric(med, "driver/direct-median")
			b.Logf("%s: median driver/direct ratio %.4f over %d interleaved pairs (goal <= 1.02)", kind, med, len(ratios))
		})
	}
}

// directCall returns a function that sends the equivalent request with no
// driver logic: the runtime renders and tokenizes the prompt itself.
func directCall(b *testing.B, rt Runtime, req Request, first Result) func() time.Duration {
	ctx := context.Background()
	switch r := rt.(type) {
	case *LlamaServer:
		// The same /completion body the driver sends, prompt given as the
		// rendered text: what a client that skipped rig would send.
		body := map[string]any{"prompt": first.RenderedPrompt, "n_predict": req.MaxTokens, "n_probs": req.TopK,
			"post_sampling_probs": false, "return_tokens": true, "cache_prompt": false, "stream": false,
			"temperature": req.Sampling.Temperature, "top_k": req.Sampling.TopK, "top_p": orOne(req.Sampling.TopP),
			"min_p": req.Sampling.MinP, "seed": req.Sampling.Seed, "samplers": []string{"top_k", "top_p", "min_p", "temperature"}}
		return func() time.Duration {
			d, err := r.Raw(ctx, "/completion", body)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
	case *Ollama:
		stream := false
		msgs := []api.Message{{Role: "user", Content: req.Messages[0].Content}}
		chat := &api.ChatRequest{Model: r.ModelTag(), Messages: msgs, Stream: &stream, Logprobs: true, TopLogprobs: req.TopK,
			Options: r.options(req)}
		return func() time.Duration {
			d, err := r.RawChat(ctx, chat)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
	}
	b.Fatalf("no direct path for %T", rt)
	return nil
}
