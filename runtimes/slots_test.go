package runtimes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLlamaServerArgsSlots holds llama-server's command line to the slot
// count: one slot (unset or 1) is exactly the line rig has always started,
// and N slots change only --parallel and --ctx-size (N × the pinned context,
// which the server divides evenly, so each slot keeps the whole pin).
func TestLlamaServerArgsSlots(t *testing.T) {
	base := Config{Binary: "/b/llama-server", Model: "/m/s.gguf", Context: 2048, Threads: 2, KVCacheType: "f16"}
	line := func(parallel, ctx string) string {
		return "/b/llama-server --model /m/s.gguf --host 127.0.0.1 --port 8080 --parallel " + parallel +
			" --ctx-size " + ctx + " --threads 2 --jinja --no-webui --offline --cache-type-k f16 --cache-type-v f16" +
			" --cache-reuse 0 --cache-ram 0 --fit off --poll 0 --no-repack --ctx-checkpoints 0"
	}
	for _, tc := range []struct {
		slots int
		want  string
	}{
		{0, line("1", "2048")},
		{1, line("1", "2048")},
		{2, line("2", "4096")},
		{8, line("8", "16384")},
	} {
		cfg := base
		cfg.Slots = tc.slots
		if got := strings.Join(llamaServerArgs(cfg, 8080), " "); got != tc.want {
			t.Errorf("slots %d:\n got %s\nwant %s", tc.slots, got, tc.want)
		}
	}
}

// TestOllamaSettingsSlots holds Ollama's environment to the slot count: one
// slot is exactly today's, N slots change only OLLAMA_NUM_PARALLEL (Ollama
// multiplies num_ctx by it for the cache), never the context a request gets.
func TestOllamaSettingsSlots(t *testing.T) {
	today := map[string]string{
		"OLLAMA_HOST": "127.0.0.1:11434", "OLLAMA_MODELS": "/w/models", "OLLAMA_NUM_PARALLEL": "1",
		"OLLAMA_MAX_LOADED_MODELS": "1", "OLLAMA_KEEP_ALIVE": "-1", "OLLAMA_CONTEXT_LENGTH": "2048",
		"OLLAMA_KV_CACHE_TYPE": "f16", "OLLAMA_NO_CLOUD": "1", "OLLAMA_NOPRUNE": "1", "OLLAMA_FLASH_ATTENTION": "1",
	}
	for _, slots := range []int{0, 1, 4} {
		cfg := Config{Context: 2048, KVCacheType: "f16", Slots: slots}
		got := ollamaSettings(cfg, 11434, "/w/models", "1", 0)
		want := maps.Clone(today)
		if slots > 1 {
			want["OLLAMA_NUM_PARALLEL"] = "4"
		}
		if !maps.Equal(got, want) {
			t.Errorf("slots %d: %v\nwant %v", slots, got, want)
		}
		o := &Ollama{cfg: cfg}
		if opts := o.runnerOptions(); opts["num_ctx"] != 2048 {
			t.Errorf("slots %d: num_ctx %v per request, want the pinned 2048", slots, opts["num_ctx"])
		}
	}
}

// TestConfigSlots: unset, 1 and nonsense are one slot.
func TestConfigSlots(t *testing.T) {
	got := []int{Config{}.slots(), Config{Slots: 1}.slots(), Config{Slots: 3}.slots(), Config{Slots: -2}.slots()}
	if want := []int{1, 1, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("slots = %v, want %v", got, want)
	}
}

// TestHoldSlotsRefusesLess: a server reporting other than the pinned
// slots, or slots with less than the pinned context, is refused; more room
// (the server pads its cache to 256 cells) is not less, and a pin above the
// model's trained length is held to that length, as with one slot.
func TestHoldSlotsRefusesLess(t *testing.T) {
	s := &LlamaServer{cfg: Config{Model: "m.gguf", Context: 1000, Slots: 2}}
	for _, c := range []struct {
		slots, ctx, trained int
		ok                  bool
	}{
		{2, 1000, 0, true}, {2, 1024, 8192, true}, {1, 2048, 8192, false}, {2, 500, 8192, false},
		{4, 1024, 8192, false}, {2, 512, 512, true}, {2, 256, 512, false},
	} {
		err := s.holdSlots(c.slots, c.ctx, c.trained)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrPinNotHeld)) {
			t.Errorf("%d slots of %d (trained %d): err = %v, want ok=%v", c.slots, c.ctx, c.trained, err, c.ok)
		}
	}
}

// TestTwoSlotsServeTwoRequestsAtOnce starts llama-server with two slots and
// sends two requests together, each with a prompt and stop cap that need
// nearly all of the pinned context: both succeed, and the server's own slot
// report shows both slots busy at the same moment, each with the whole
// pinned context.
func TestTwoSlotsServeTwoRequestsAtOnce(t *testing.T) {
	const pinned, stopCap = 1024, 48
	rt := startReal(t, "llama-server", "smollm2-135m-instruct", func(c *Config) { c.Context, c.Slots = pinned, 2 })
	ls := rt.(*LlamaServer)
	ctx := context.Background()
	if got := rt.Pins().Slots; got != 2 {
		t.Errorf("pins say %d slots, want 2", got)
	}
	idle, err := ls.SlotReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(idle) != 2 {
		t.Fatalf("the server reports %d slots, want 2: %+v", len(idle), idle)
	}
	for _, sl := range idle {
		if sl.Context != pinned {
			t.Errorf("slot %d has n_ctx %d, want the pinned %d", sl.ID, sl.Context, pinned)
		}
	}
	// A prompt that, with the stop cap, fills all but a few cells of one
	// slot's pinned context: on half of it the call would fail.
	ids, err := ls.Tokenize(ctx, strings.Repeat("river stone ", 600))
	if err != nil {
		t.Fatal(err)
	}
	prompt := ids[:pinned-stopCap-8]
	results, errs, most := twoAtOnce(func() (Result, error) {
		return rt.Generate(ctx, Request{CallID: "slot", PromptTokens: prompt,
			Sampling: Sampling{Temperature: 0, Seed: 1}, MaxTokens: stopCap, TopK: 5})
	}, func() []SlotState {
		slots, err := ls.SlotReport(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slots
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if r := results[i]; r.PromptTokens != len(prompt) || r.OutputTokens == 0 {
			t.Errorf("request %d read %d prompt tokens (sent %d) and made %d", i, r.PromptTokens, len(prompt), r.OutputTokens)
		}
	}
	if most != 2 {
		t.Errorf("at most %d slots were busy at once by the server's own report, want 2", most)
	}
}

// TestOllamaSlotsEachGetThePinnedContext starts Ollama with two slots: its
// runner reports two sequences, each with the whole pinned context (it
// multiplies num_ctx by OLLAMA_NUM_PARALLEL), and two requests sent
// together both answer.
func TestOllamaSlotsEachGetThePinnedContext(t *testing.T) {
	const pinned = 1024
	rt := startReal(t, "ollama", "smollm2-135m-instruct", func(c *Config) { c.Context, c.Slots = pinned, 2 })
	if got := rt.Pins().Slots; got != 2 {
		t.Errorf("pins say %d slots, want 2", got)
	}
	log, err := os.ReadFile(rt.Sandbox().logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"n_seq_max     = 2", "n_ctx_seq     = 1024"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("Ollama's runner log lacks %q", want)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = rt.Generate(context.Background(), Request{CallID: "slot", Messages: []Message{{Role: "user", Content: "Count to ten."}},
				Sampling: Sampling{Temperature: 0, Seed: 1}, MaxTokens: 16, TopK: 5})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestSlotReportIsEachRequestsOwnProgress sends a request to llama-server's
// second slot alone (Request.Slot 2), then one to each slot together: the
// server serves each in the slot it was given, and its slot report counts
// each request's own progress (prompt tokens evaluated and tokens
// generated), which grows while it runs: what the governor's per-slot hang
// check reads (run/slotprogress.go).
func TestSlotReportIsEachRequestsOwnProgress(t *testing.T) {
	const stopCap = 64
	rt := startReal(t, "llama-server", "smollm2-135m-instruct", func(c *Config) { c.Context, c.Slots = 512, 2 })
	ls := rt.(*LlamaServer)
	ctx := context.Background()
	ids, err := ls.Tokenize(ctx, strings.Repeat("river stone ", 40))
	if err != nil {
		t.Fatal(err)
	}
	// send runs a request in each of slots and returns, per slot id, the
	// progress the server reported for it while they ran.
	send := func(slots ...int) map[int][]int {
		var wg sync.WaitGroup
		errs := make([]error, len(slots))
		for i, s := range slots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = rt.Generate(ctx, Request{CallID: fmt.Sprintf("slot-%d", s), PromptTokens: ids,
					Sampling: Sampling{Temperature: 0, Seed: 1}, MaxTokens: stopCap, TopK: 5, Slot: s})
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		seen := map[int][]int{}
		for polling := true; polling; {
			select {
			case <-done:
				polling = false
			case <-time.After(20 * time.Millisecond):
				rep, err := ls.SlotReport(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, sl := range rep {
					if sl.Processing {
						seen[sl.ID] = append(seen[sl.ID], sl.Progress())
					}
				}
			}
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("request in slot %d: %v", slots[i], err)
			}
		}
		return seen
	}
	alone := send(2)
	if len(alone[0]) != 0 || len(alone[1]) == 0 {
		t.Fatalf("a request sent to slot 2 alone: the server showed slots %v busy, want only id 1", alone)
	}
	both := send(1, 2)
	for id := range 2 {
		p := both[id]
		if len(p) < 2 || p[len(p)-1] <= p[0] {
			t.Errorf("slot id %d: progress %v while its request ran, want it to grow", id, p)
		}
		if p[len(p)-1] > len(ids)+stopCap {
			t.Errorf("slot id %d: progress %d is past its own request's %d prompt tokens and %d output: not its own count", id, p[len(p)-1], len(ids), stopCap)
		}
	}
}

// twoAtOnce sends two requests at once with generate and, until both have
// answered, polls the server's own slot report every 20 ms: it returns each
// answer and the most slots the server said were processing at one time.
func twoAtOnce(generate func() (Result, error), report func() []SlotState) ([]Result, []error, int) {
	var wg sync.WaitGroup
	results := make([]Result, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = generate()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	most := 0
	for {
		select {
		case <-done:
			return results, errs, most
		case <-time.After(20 * time.Millisecond):
			busy := 0
			for _, sl := range report() {
				if sl.Processing {
					busy++
				}
			}
			most = max(most, busy)
		}
	}
}
