package speed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"rig/internal/offload"
	"rig/internal/provision"
	"rig/runtimes"
)

// SlotsGoal is what a study's batch should get of the runtime's own batched
// throughput at every slot count (issue #45).
const SlotsGoal = 0.8

// SlotsRequest is one `rig bench slots`: one arm of the quick study (its
// model, context, sampling and stop cap) started at each slot count, a batch
// of as many requests sent at once through the trial's own call
// (Runtime.Generate), interleaved with llama.cpp's llama-batched-bench on
// the same model, threads, prompt and generation lengths and sequence count.
type SlotsRequest struct {
	Installed provision.Installed
	// Runtimes: llama-server (default) and Ollama, which has no batched
	// bench of its own, so only its scaling over one slot is shown.
	Runtimes []string
	// Model is a registry name (default the quick study's incumbent).
	Model string
	// Slots are the slot counts, each also the batch size (default 1, 2, 4, 8).
	Slots []int
	// Threads is the runtime's and the bench's thread count (0: the
	// runtime's default, as a study starts it).
	Threads int
	// Context is the pinned context of one request (default the quick
	// study's 2048); GenTokens its stop cap (default 96), which every
	// request here reaches; PromptTokens the prompt of each request.
	Context, PromptTokens, GenTokens int
	Sampling                         runtimes.Sampling
	// TopK is the top log-probabilities a trial asks for at each step (5).
	TopK      int
	Reps      int
	WorkDir   string
	NoSandbox bool
	// ModelFile, when set, is a GGUF to run instead of the registry's
	// Model: on a card's machine no model file travels, so the GPU check
	// makes one there (rig runtimes synth-model).
	ModelFile string
	// Device is "cpu" (empty) or "cuda": on cuda the CUDA llama-server with
	// every layer on the card, against the CUDA build's own
	// llama-batched-bench (-ngl 99), as scripts/gpu-check.sh runs it.
	Device string
}

// DeviceCUDA is SlotsRequest.Device for the card.
const DeviceCUDA = "cuda"

// SlotBatch is one batch: as many requests as slots, sent together.
type SlotBatch struct {
	Rep          int           `json:"rep"`
	Wall         time.Duration `json:"wall_ns"`
	PromptTokens int           `json:"prompt_tokens"`
	OutputTokens int           `json:"output_tokens"`
	// Short counts requests that stopped before the stop cap.
	Short int `json:"short"`
}

// BatchedBench is one llama-batched-bench run (its jsonl line): t_pp and
// t_tg are the prompt and generation phases, t their sum; s_* are tokens/s.
type BatchedBench struct {
	Rep int     `json:"rep"`
	PP  int     `json:"pp"`
	TG  int     `json:"tg"`
	PL  int     `json:"pl"`
	TPP float64 `json:"t_pp"`
	SPP float64 `json:"speed_pp"`
	TTG float64 `json:"t_tg"`
	STG float64 `json:"speed_tg"`
	T   float64 `json:"t"`
	S   float64 `json:"speed"`
}

// SlotRow is one runtime at one slot count.
type SlotRow struct {
	Runtime string      `json:"runtime"`
	Slots   int         `json:"slots"`
	Batches []SlotBatch `json:"batches"`
	// Gen and All are rig's tokens/s over each batch's wall time: the
	// generated tokens, and the prompt and generated tokens together (as
	// the bench's S counts them).
	Gen Stat `json:"gen_tok_s"`
	All Stat `json:"all_tok_s"`
	// Bench is llama-batched-bench at the same sequence count (llama-server
	// only); STG and S its generation and overall tokens/s.
	Bench []BatchedBench `json:"batched_bench,omitempty"`
	STG   Stat           `json:"bench_s_tg"`
	S     Stat           `json:"bench_s"`
	// Ratio is rig's overall tokens/s over the bench's S (0 without a
	// bench); SpeedUp rig's generated tokens/s over its own at one slot,
	// BenchSpeedUp the bench's S_TG over its own at one sequence.
	Ratio        float64 `json:"ratio,omitempty"`
	SpeedUp      float64 `json:"speed_up"`
	BenchSpeedUp float64 `json:"bench_speed_up,omitempty"`
	Pass         bool    `json:"pass"`
}

// SlotsResult is the whole bench.
type SlotsResult struct {
	Date         string    `json:"date"`
	Machine      string    `json:"machine"`
	Model        string    `json:"model"`
	Quant        string    `json:"quant"`
	Threads      int       `json:"threads"`
	Context      int       `json:"context"`
	PromptTokens int       `json:"prompt_tokens"`
	GenTokens    int       `json:"gen_tokens"`
	Reps         int       `json:"reps"`
	BenchArgs    string    `json:"batched_bench_args"`
	Rows         []SlotRow `json:"rows"`
	Builds       []Build   `json:"builds"`
	Pass         bool      `json:"pass"`
}

// The quick study's incumbent arm (examples/quick-study/design.json).
const (
	quickModel   = "smollm2-135m-instruct"
	quickContext = 2048
	quickStopCap = 96
)

func slotsDefaults(req SlotsRequest) SlotsRequest {
	if len(req.Runtimes) == 0 {
		req.Runtimes = []string{"llama-server"}
	}
	if req.Model == "" {
		req.Model = quickModel
	}
	if len(req.Slots) == 0 {
		req.Slots = []int{1, 2, 4, 8}
	}
	if req.Context == 0 {
		req.Context = quickContext
	}
	if req.GenTokens == 0 {
		req.GenTokens = quickStopCap
	}
	if req.PromptTokens == 0 {
		req.PromptTokens = 128
	}
	if req.TopK == 0 {
		req.TopK = 5
	}
	if req.Reps == 0 {
		req.Reps = 2
	}
	if req.Sampling == (runtimes.Sampling{}) {
		req.Sampling = runtimes.Sampling{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42}
	}
	return req
}

// Check refuses a request no run could serve, before anything starts.
func (req SlotsRequest) Check() error {
	for _, n := range req.Slots {
		if n < 1 || n > 256 {
			return fmt.Errorf("--slots %d: a slot count is 1 to 256", n)
		}
	}
	for _, kind := range req.Runtimes {
		if kind != "llama-server" && kind != "ollama" {
			return fmt.Errorf("--runtime %s: llama-server or ollama", kind)
		}
		if req.Device == DeviceCUDA && kind != "llama-server" {
			return fmt.Errorf("--runtime %s with --device cuda: only llama-server has a batched bench to hold it to on the card", kind)
		}
	}
	if req.Device != "" && req.Device != "cpu" && req.Device != DeviceCUDA {
		return fmt.Errorf("--device %s: cpu or cuda", req.Device)
	}
	if req.PromptTokens < 0 || req.GenTokens < 0 || req.Reps < 0 || req.Threads < 0 {
		return errors.New("--prompt-tokens, --gen-tokens, --reps and --threads are counts (0 or more)")
	}
	return nil
}

// RunSlots runs the bench: for each runtime and slot count, one server with
// that many slots, and per repetition one batch through it and (on
// llama-server) one llama-batched-bench run, in alternating order.
func RunSlots(ctx context.Context, req SlotsRequest) (SlotsResult, error) {
	req = slotsDefaults(req)
	if err := req.Check(); err != nil {
		return SlotsResult{}, err
	}
	res := SlotsResult{Date: time.Now().UTC().Format("2006-01-02"), Machine: runtimes.ReadMachine().String(),
		Model: req.Model, Context: req.Context, PromptTokens: req.PromptTokens, GenTokens: req.GenTokens, Reps: req.Reps, Pass: true}
	if req.Device == DeviceCUDA {
		// The CUDA build's own bench sits beside its server.
		req.Installed.LlamaBatchedBench = ""
		if req.Installed.LlamaServerCUDA != "" {
			req.Installed.LlamaBatchedBench = filepath.Join(filepath.Dir(req.Installed.LlamaServerCUDA), "llama-batched-bench")
		}
	}
	if slices.Contains(req.Runtimes, "llama-server") && req.Installed.LlamaBatchedBench == "" {
		return res, fmt.Errorf("bench slots: %s names no LLAMA_BATCHED_BENCH_BIN (or, with --device cuda, no CUDA llama-server beside which it sits): %w (run make setup)", req.Installed.File, provision.ErrNotProvisioned)
	}
	if req.PromptTokens+req.GenTokens > req.Context {
		return res, fmt.Errorf("bench slots: a prompt of %d and %d generated tokens do not fit the context of %d", req.PromptTokens, req.GenTokens, req.Context)
	}
	m, err := slotsModel(req)
	if err != nil {
		return res, err
	}
	res.Model = m.Name
	res.Quant = m.Quant
	work := req.WorkDir
	if work == "" {
		if work, err = os.MkdirTemp("", "rig-bench-slots-"); err != nil {
			return res, err
		}
		defer os.RemoveAll(work)
	}
	for _, kind := range req.Runtimes {
		build := kind
		if req.Device == DeviceCUDA {
			build = offload.ComponentLlamaServerCUDA
		}
		b, err := runtimes.BuildOf(req.Installed, build)
		if err != nil {
			return res, err
		}
		var one *SlotRow
		for _, n := range req.Slots {
			row, pins, err := slotRow(ctx, req, b, m, n, filepath.Join(work, fmt.Sprintf("%s-%d", kind, n)))
			if err != nil {
				return res, fmt.Errorf("bench slots: %s at %d slots: %w", kind, n, err)
			}
			if res.Threads == 0 {
				res.Threads = pins.Threads
				res.BenchArgs = batchedBenchArgsLine(req, m, pins.Threads)
			}
			if len(res.Builds) == 0 || res.Builds[len(res.Builds)-1].Runtime != kind {
				res.Builds = append(res.Builds, Build{Runtime: kind, Version: pins.RuntimeVersion, BinarySHA256: pins.BinarySHA256,
					BuildFlags: pins.BuildFlags, WeightRepack: pins.WeightRepack, CPU: pins.CPU})
			}
			if one == nil {
				one = &row
			}
			row.SpeedUp = row.Gen.Mean / one.Gen.Mean
			if len(row.Bench) > 0 {
				row.Ratio = row.All.Mean / row.S.Mean
				row.BenchSpeedUp = row.STG.Mean / one.STG.Mean
				row.Pass = row.Ratio >= SlotsGoal
				res.Pass = res.Pass && row.Pass
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

// slotRow starts the runtime with n slots and measures its batches, with
// llama-batched-bench interleaved on llama-server.
func slotRow(ctx context.Context, req SlotsRequest, b runtimes.Build, m provision.Model, n int, work string) (SlotRow, runtimes.Pins, error) {
	row := SlotRow{Runtime: b.Runtime, Slots: n}
	cfg := runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: req.Context,
		Threads: req.Threads, Slots: n, WorkDir: work, NoSandbox: req.NoSandbox}
	if req.Device == DeviceCUDA {
		cfg.Offload = offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}
	}
	rt, err := b.Start(ctx, cfg)
	if err != nil {
		return row, runtimes.Pins{}, err
	}
	defer rt.Stop(context.Background())
	pins := rt.Pins()
	if pins.Slots != n {
		return row, pins, fmt.Errorf("the runtime's pins say %d slots", pins.Slots)
	}
	reqs, err := batchRequests(ctx, req, rt, n)
	if err != nil {
		return row, pins, err
	}
	// Warm-up: the first batch after a load pays for page faults and thread
	// start-up, which no repetition should.
	if _, err := sendBatch(ctx, rt, reqs, 0, req.GenTokens); err != nil {
		return row, pins, fmt.Errorf("warm-up: %w", err)
	}
	ls, _ := rt.(*runtimes.LlamaServer)
	var gen, all, stg, s []float64
	for rep := 1; rep <= req.Reps; rep++ {
		// The bench first on even repetitions: a machine whose load drifts
		// slows both alike.
		steps := []func() error{
			func() error {
				bt, err := sendBatch(ctx, rt, reqs, rep, req.GenTokens)
				if err != nil {
					return err
				}
				row.Batches = append(row.Batches, bt)
				gen = append(gen, float64(bt.OutputTokens)/bt.Wall.Seconds())
				all = append(all, float64(bt.PromptTokens+bt.OutputTokens)/bt.Wall.Seconds())
				return nil
			},
		}
		if ls != nil {
			steps = append(steps, func() error {
				bb, err := runBatchedBench(ctx, req, m, pins.Threads, n)
				if err != nil {
					return err
				}
				bb.Rep = rep
				row.Bench = append(row.Bench, bb)
				stg, s = append(stg, bb.STG), append(s, bb.S)
				return nil
			})
		}
		if rep%2 == 0 {
			slices.Reverse(steps)
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return row, pins, fmt.Errorf("rep %d: %w", rep, err)
			}
		}
	}
	row.Gen, row.All, row.STG, row.S = statOf(gen), statOf(all), statOf(stg), statOf(s)
	return row, pins, nil
}

// batchRequests are the n requests of a batch: the arm's sampling, stop cap
// and top-K, each a counting prompt from another number (every model goes on
// counting for as long as it is let, so each reaches the stop cap). On
// llama-server the prompt goes as exactly PromptTokens token ids, the
// length the bench is given; Ollama takes text only, so it gets the same
// prompts as text.
func batchRequests(ctx context.Context, req SlotsRequest, rt runtimes.Runtime, n int) ([]runtimes.Request, error) {
	ls, _ := rt.(*runtimes.LlamaServer)
	var out []runtimes.Request
	for i := range n {
		r := runtimes.Request{CallID: fmt.Sprintf("slot-%d", i+1), Sampling: req.Sampling, MaxTokens: req.GenTokens, TopK: req.TopK}
		if ls == nil {
			// About four tokens a number ("1234," digit by digit); the
			// batch records the count Ollama read.
			r.Prompt = countingPromptOf(1+1000*i, max(1, req.PromptTokens/4))
			out = append(out, r)
			continue
		}
		text := countingPromptOf(1+1000*i, req.PromptTokens)
		ids, err := ls.Tokenize(ctx, text)
		if err != nil {
			return nil, err
		}
		if len(ids) < req.PromptTokens {
			return nil, fmt.Errorf("a counting prompt of %d tokens came out %d", req.PromptTokens, len(ids))
		}
		r.PromptTokens = ids[:req.PromptTokens]
		out = append(out, r)
	}
	return out, nil
}

// countingPromptOf counts from n through count numbers: at least count
// tokens, each number being one or more.
func countingPromptOf(n, count int) string {
	s := "Counting:"
	for i := n; i < n+count; i++ {
		s += fmt.Sprintf(" %d,", i)
	}
	return s
}

// sendBatch sends reqs at once, each through the trial's own call, and
// times the batch from the first send to the last answer.
func sendBatch(ctx context.Context, rt runtimes.Runtime, reqs []runtimes.Request, rep, stopCap int) (SlotBatch, error) {
	results := make([]runtimes.Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = rt.Generate(ctx, r)
		}()
	}
	wg.Wait()
	bt := SlotBatch{Rep: rep, Wall: time.Since(start)}
	if err := errors.Join(errs...); err != nil {
		return bt, err
	}
	for _, r := range results {
		bt.PromptTokens += r.PromptTokens
		bt.OutputTokens += r.OutputTokens
		if r.OutputTokens < stopCap {
			bt.Short++
		}
	}
	return bt, nil
}

// slotsModel is the model the bench runs: the registry's, or ModelFile.
func slotsModel(req SlotsRequest) (provision.Model, error) {
	if req.ModelFile == "" {
		return req.Installed.Model(req.Model)
	}
	sum, err := runtimes.FileSHA256(req.ModelFile)
	if err != nil {
		return provision.Model{}, fmt.Errorf("--model-file %s: %w", req.ModelFile, err)
	}
	return provision.Model{Name: strings.TrimSuffix(filepath.Base(req.ModelFile), ".gguf"), Path: req.ModelFile, SHA256: sum, Quant: "as written"}, nil
}
