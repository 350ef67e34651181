package runtimes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ollama/ollama/api"

	"rig/internal/gguf"
	"rig/internal/offload"
)

// Ollama drives a private `ollama serve`: its own HOME and models directory,
// Config.Slots parallel requests, the model imported from its pinned GGUF (Ollama picks
// the chat template from the file's own metadata), reached through the
// official api client over a unix socket forwarded into its sandbox.
type Ollama struct {
	cfg    Config
	sb     *Sandbox
	sock   string
	client *api.Client
	model  string // the name the model was imported under
	pins   Pins
	meter  peakMeter
	think  bool // the model reports the "thinking" capability
	// template says which chat format the pins hold: the GGUF's own, or the family's.
	template string
	load     *LoadReport // where the runner put the model, read for an offload pin
}

const ollamaPort = 11434

// StartOllama verifies the model against its pin, starts ollama serve in its
// sandbox, and imports the model into the private store.
func StartOllama(ctx context.Context, cfg Config) (*Ollama, error) {
	if err := prepareWorkDir(&cfg); err != nil {
		return nil, err
	}
	if err := verifyModel(cfg.Model, cfg.ModelSHA256); err != nil {
		return nil, err
	}
	if err := ollamaHoldsContext(cfg.Model, cfg.Context); err != nil {
		return nil, err
	}
	flashAttention, err := ollamaFlashAttention(cfg)
	if err != nil {
		return nil, err
	}
	port := ollamaPort
	if cfg.NoSandbox {
		p, err := FreeLoopbackPort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	models := cfg.ModelStore
	if models == "" {
		models = filepath.Join(cfg.WorkDir, "models")
	}
	if err := os.MkdirAll(models, 0o700); err != nil {
		return nil, err
	}
	overhead, err := ollamaGPUOverhead(cfg)
	if err != nil {
		return nil, err
	}
	settings := ollamaSettings(cfg, port, models, flashAttention, overhead)
	env, err := BuildEnv(cfg.WorkDir, settings)
	if err != nil {
		return nil, err
	}
	sock, err := socketPath(cfg.WorkDir, "ollama.sock")
	if err != nil {
		return nil, err
	}
	o := &Ollama{cfg: cfg, sock: sock}
	sb, err := StartSandbox(ctx, SandboxSpec{
		Argv: []string{cfg.Binary, "serve"}, Env: env, Dir: cfg.WorkDir, CgroupDir: cfg.CgroupDir,
		// The model arrives over the API (CreateBlob), so Ollama needs no read
		// access to the GGUF; it writes its blobs into the model store.
		Writable: []string{models}, Limits: RuntimeLimits(),
		Inbound: []Forward{{Socket: o.sock, Port: port}}, NoSandbox: cfg.NoSandbox, GPU: cfg.Offload.OnCard(),
	}, LogPath(cfg.WorkDir, "ollama"))
	if err != nil {
		return nil, err
	}
	o.sb = sb
	sb.OnCard = cfg.Offload.OnCard()
	// Ollama refuses requests whose Host is not a loopback name; the socket
	// leads to its loopback port, so the URL says so.
	base, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(port))
	o.client = api.NewClient(base, socketClient(o.sock))
	o.meter = peakMeter{cgroup: cfg.CgroupDir, root: sb.RuntimePID}
	if err := o.waitReady(ctx); err != nil {
		sb.Kill()
		return nil, err
	}
	if err := o.importModel(ctx); err != nil {
		sb.Kill()
		return nil, err
	}
	return o, nil
}

// ollamaFlashAttention is the OLLAMA_FLASH_ATTENTION value the offload pin
// asks for, or the error for a pin Ollama cannot hold.
func ollamaFlashAttention(cfg Config) (string, error) {
	flashAttention := "1"
	if cfg.Offload.FlashAttention == "off" {
		if cfg.KVCacheType != "f16" {
			return "", fmt.Errorf("ollama: the offload pin turns flash attention off with KV cache type %s: Ollama runs a quantized cache only with flash attention (it would silently run f16); pin flash_attention \"on\" or the f16 cache", cfg.KVCacheType)
		}
		flashAttention = "0"
	}
	if cfg.Offload.KVOnHost {
		return "", errors.New("ollama: the offload pin keeps the KV cache on the host, which Ollama has no setting for (run the arm on llama-server)")
	}
	return flashAttention, nil
}

// ollamaSettings is the environment that pins ollama serve: one model,
// Config.Slots requests at a time, kept loaded, with the pinned context and
// cache. Ollama sizes the runner's cache as num_ctx × OLLAMA_NUM_PARALLEL
// and gives each parallel sequence num_ctx of it, so every request keeps the
// pinned context.
func ollamaSettings(cfg Config, port int, models, flashAttention string, overhead uint64) map[string]string {
	settings := map[string]string{
		"OLLAMA_HOST":              "127.0.0.1:" + strconv.Itoa(port),
		"OLLAMA_MODELS":            models,
		"OLLAMA_NUM_PARALLEL":      strconv.Itoa(cfg.slots()),
		"OLLAMA_MAX_LOADED_MODELS": "1",
		"OLLAMA_KEEP_ALIVE":        "-1",
		"OLLAMA_CONTEXT_LENGTH":    strconv.Itoa(cfg.Context),
		"OLLAMA_KV_CACHE_TYPE":     cfg.KVCacheType,
		"OLLAMA_NO_CLOUD":          "1",
		"OLLAMA_NOPRUNE":           "1",
		// Without flash attention Ollama's llama.cpp runner silently ignores a
		// quantized KV-cache type and runs f16, unlike the pins say; so it is
		// on unless an f16 arm's offload pin turns it off.
		"OLLAMA_FLASH_ATTENTION": flashAttention,
	}
	if overhead > 0 {
		settings["OLLAMA_GPU_OVERHEAD"] = strconv.FormatUint(overhead, 10)
	}
	return settings
}

// ollamaGPUOverhead is what Ollama must leave free on the card for an arm
// held to a simulated smaller one: the rest of the real card. Ollama's
// scheduler then places layers as the smaller card allows, and the load
// report shows whether the pin was held.
func ollamaGPUOverhead(cfg Config) (uint64, error) {
	if cfg.CardBudget == 0 || !cfg.Offload.OnCard() {
		return 0, nil
	}
	total, err := CardTotalBytes()
	if err != nil {
		return 0, fmt.Errorf("ollama: a simulated card of %d MiB is carved from the real one, whose size is unknown: %w", cfg.CardBudget>>20, err)
	}
	if cfg.CardBudget >= total {
		return 0, nil
	}
	return total - cfg.CardBudget, nil
}

func (o *Ollama) crashed(what string) error {
	return fmt.Errorf("ollama %s: %w (%v):\n%s", what, ErrCrashed, o.sb.ExitError(), o.sb.LogTail(8))
}

func (o *Ollama) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(o.cfg.ReadyWithin)
	for {
		if err := o.client.Heartbeat(ctx); err == nil {
			return nil
		}
		select {
		case <-o.sb.Done():
			return o.crashed("while starting")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ollama serve: %w within %s:\n%s", ErrNotReady, o.cfg.ReadyWithin, o.sb.LogTail(8))
		}
	}
}

// guard cancels ctx when the sandbox exits, so a crash mid-call is an error, not a hang.
func (o *Ollama) guard(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-o.sb.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (o *Ollama) importModel(ctx context.Context) error {
	digest := "sha256:" + o.cfg.ModelSHA256
	if o.cfg.ModelSHA256 == "" {
		sum, err := FileSHA256(o.cfg.Model)
		if err != nil {
			return err
		}
		digest = "sha256:" + sum
	}
	f, err := os.Open(o.cfg.Model)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", o.cfg.Model, ErrModelFile, err)
	}
	defer f.Close()
	gctx, cancel := o.guard(ctx)
	defer cancel()
	if err := o.client.CreateBlob(gctx, digest, f); err != nil {
		if o.exited() {
			return o.crashed("while importing the model")
		}
		return fmt.Errorf("ollama: uploading %s: %w", o.cfg.Model, err)
	}
	if err := o.createPinnedModel(gctx, digest); err != nil {
		return err
	}
	show, err := o.client.Show(gctx, &api.ShowRequest{Model: o.model})
	if err != nil {
		return fmt.Errorf("ollama: show %s: %w", o.model, err)
	}
	for _, c := range show.Capabilities {
		if string(c) == "thinking" {
			o.think = true
		}
	}
	ollamaDigest, err := manifestDigest(o.models(), o.model)
	if err != nil {
		return fmt.Errorf("ollama: reading the manifest of %s: %w", o.model, err)
	}
	// Load the model now, so the first counted call does not pay for it and
	// the libraries of the runner process can be read. It carries the
	// runner options the calls send, or the first call would load again.
	stream := false
	load := &api.GenerateRequest{Model: o.model, Stream: &stream, Options: o.runnerOptions()}
	if err := o.client.Generate(gctx, load, func(api.GenerateResponse) error { return nil }); err != nil {
		if o.exited() {
			return o.crashed("while loading the model")
		}
		return fmt.Errorf("ollama: loading %s: %w: %v", o.cfg.Model, ErrModelFile, err)
	}
	if o.load, err = holdOffload("ollama", o.cfg.Model, o.cfg.Offload, o.sb.logPath); err != nil {
		return err
	}
	return o.recordPins(gctx, digest, ollamaDigest)
}

// createPinnedModel creates the model rig calls from the uploaded blob, with
// the chat template the pins name when the GGUF's own is not used.
func (o *Ollama) createPinnedModel(gctx context.Context, digest string) error {
	o.model = "rig-" + sanitizeName(o.cfg.ModelName) + ":pinned"
	create := &api.CreateRequest{Model: o.model, Files: map[string]string{filepath.Base(o.cfg.Model): digest}}
	own, ft, err := chatTemplate(o.cfg.Model)
	if err != nil {
		return err
	}
	o.template = "the GGUF's own"
	if !own {
		create.Template = ft.Ollama
		create.Parameters = map[string]any{"stop": ft.Stop}
		o.template = ft.Name
	}
	err = o.client.Create(gctx, create, func(api.ProgressResponse) error { return nil })
	if err != nil {
		if o.exited() {
			return o.crashed("while importing the model")
		}
		return fmt.Errorf("ollama: importing %s: %w: %v", o.cfg.Model, ErrModelFile, err)
	}
	return nil
}

// recordPins reads Ollama's version and stack and sets o.pins from them and
// the loaded model.
func (o *Ollama) recordPins(gctx context.Context, digest, ollamaDigest string) error {
	version, err := o.client.Version(gctx)
	if err != nil {
		if o.exited() {
			return o.crashed("while reporting its version")
		}
		return fmt.Errorf("ollama: reading its version: %w", err)
	}
	stack, err := readStack("ollama", o.cfg, version, o.sb.RuntimePID)
	if err != nil {
		return err
	}
	o.pins = Pins{
		Stack: stack, ModelName: o.cfg.ModelName, ModelFile: o.cfg.Model, ModelSHA256: strings.TrimPrefix(digest, "sha256:"),
		OllamaDigest: ollamaDigest, Context: o.cfg.Context, Slots: o.cfg.slots(), KVCacheType: o.cfg.KVCacheType, Threads: o.cfg.Threads, ChatTemplate: o.template,
		Sandboxed: o.sb.Containment.Sandboxed, NoSandbox: o.cfg.NoSandbox, Containment: o.sb.Containment, Machine: ReadMachine(),
		Offload: o.cfg.Offload, Load: o.load, CPU: readCPUBackend("ollama", o.sb.logPath, stack.Libraries),
	}
	if o.cfg.Offload.Backend == offload.BackendCUDA {
		o.pins.Machine.Backend = offload.BackendCUDA // as llama-server's: only a card's run says it
	}
	return nil
}

func (o *Ollama) exited() bool { return o.sb.exitedWithin(2 * time.Second) }

// models is the directory the server keeps its models in.
func (o *Ollama) models() string {
	if o.cfg.ModelStore != "" {
		return o.cfg.ModelStore
	}
	return filepath.Join(o.cfg.WorkDir, "models")
}

func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	if b.Len() == 0 {
		return "model"
	}
	return b.String()
}

func (o *Ollama) effortFor(e Effort) (EffortRecord, *api.ThinkValue) {
	rec := EffortRecord{Label: e.Level, Graded: o.think, Supported: o.think}
	if !o.think || e.Level == "" {
		return rec, nil
	}
	rec.Raw = fmt.Sprintf(`"think":%q`, e.Level)
	return rec, &api.ThinkValue{Value: e.Level}
}

// runnerOptions are the pinned options that decide Ollama's runner: a call
// whose runner options differ from the loaded runner's makes Ollama load the
// model again, so the start-up load and every call send the same ones.
func (o *Ollama) runnerOptions() map[string]any {
	opts := map[string]any{"num_ctx": o.cfg.Context, "num_thread": o.cfg.Threads}
	if p := o.cfg.Offload; p.Backend == offload.BackendCUDA {
		// num_gpu is layers on the card; Ollama caps a count above the
		// model's at all of them, so "every layer" is a count no model has.
		layers := p.GPULayers
		if layers == offload.AllLayers {
			layers = ollamaAllLayers
		}
		opts["num_gpu"] = layers
	}
	return opts
}

// ollamaAllLayers is num_gpu for every layer and the output head.
const ollamaAllLayers = 9999

func (o *Ollama) options(req Request) map[string]any {
	opts := o.runnerOptions()
	opts["temperature"] = req.Sampling.Temperature
	opts["top_k"] = req.Sampling.TopK
	opts["top_p"] = orOne(req.Sampling.TopP)
	opts["min_p"] = req.Sampling.MinP
	opts["seed"] = req.Sampling.Seed
	opts["num_predict"] = req.MaxTokens
	// Ollama applies a repeat penalty of 1.1 unless told otherwise, after
	// the log-probabilities it reports and outside the recorded sampling
	// pins; llama-server applies none. Pinned off, both runtimes sample by
	// the same recorded rule.
	opts["repeat_penalty"] = 1.0
	if len(req.Stop) > 0 {
		opts["stop"] = req.Stop
	}
	return opts
}

// Generate sends one chat call with logprobs and top_logprobs = K. Ollama gives
// no token ids; steps carry ids of -1 and the record says so.
func (o *Ollama) Generate(ctx context.Context, req Request) (Result, error) {
	if req.TopK <= 0 {
		req.TopK = 5
	}
	if len(req.PromptTokens) > 0 {
		return Result{}, errors.New("ollama: prompts as token ids are not supported by its API; use messages")
	}
	if req.Prompt != "" {
		return o.completionOllama(ctx, req)
	}
	eff, think := o.effortFor(req.Effort)
	res := Result{CallID: req.CallID, Effort: eff, PeakSource: o.meter.source()}
	msgs := make([]api.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = api.Message{Role: m.Role, Content: m.Content}
	}
	gctx, cancel := o.guard(ctx)
	defer cancel()
	stream := false
	// The exact prompt the template produced, for the generation record. The
	// server renders it without touching the runner, so it runs beside the
	// generation instead of before it.
	render := &api.ChatRequest{Model: o.model, Messages: msgs, Stream: &stream, Options: o.options(req), Think: think, DebugRenderOnly: true}
	rendered := make(chan error, 1)
	go func() {
		rendered <- o.client.Chat(gctx, render, func(r api.ChatResponse) error {
			if r.DebugInfo != nil {
				res.RenderedPrompt = r.DebugInfo.RenderedTemplate
			}
			return nil
		})
	}()
	// Ollama truncates a prompt longer than the context and shifts the
	// context when generation reaches its end, unless told not to; rig
	// wants the refusal instead (ErrPromptTooLong).
	off := false
	chat := &api.ChatRequest{Model: o.model, Messages: msgs, Stream: &stream, Options: o.options(req), Think: think, Logprobs: true, TopLogprobs: req.TopK,
		Truncate: &off, Shift: &off}
	peak := o.meter.start()
	start := time.Now()
	var last api.ChatResponse
	// Built once rather than added to in place (quadratic over a long
	// answer); the socket's client stops reading at the response cap.
	var text, thinking strings.Builder
	gctx, trip := withCapTrip(gctx)
	err := o.client.Chat(gctx, chat, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		thinking.WriteString(r.Message.Thinking)
		res.Steps = appendOllamaSteps(res.Steps, r.Logprobs)
		last = r
		return nil
	})
	if terr := trip.Err(); terr != nil {
		// An answer cut at the cap is a refusal that says so, not a short
		// answer (nor, cut after a repeated token, a repeat limit).
		err, last = terr, api.ChatResponse{}
	}
	res.Text, res.Thinking = text.String(), thinking.String()
	res.Wall = time.Since(start)
	res.PeakMemory = peak.read()
	if rerr := <-rendered; rerr != nil && err == nil {
		err = fmt.Errorf("rendering the prompt: %w", rerr)
	}
	return o.endCall(res, err, ollamaEnd{Done: last.Done, DoneReason: last.DoneReason, Metrics: last.Metrics}, req, "chat")
}

// appendOllamaSteps adds a streamed piece's chosen tokens, each with its
// top-K alternatives, to steps.
func appendOllamaSteps(steps []Step, lps []api.Logprob) []Step {
	for _, lp := range lps {
		st := Step{Candidate: ollamaCandidate(lp.TokenLogprob)}
		for _, t := range lp.TopLogprobs {
			st.Top = append(st.Top, ollamaCandidate(t))
		}
		steps = append(steps, st)
	}
	return steps
}

// ollamaEnd is what an answer's final message says, chat or raw generate.
type ollamaEnd struct {
	Done       bool
	DoneReason string
	api.Metrics
}

// endCall turns a finished call (chat, or a raw completion) into its Result
// or its refusal: one reading of Ollama's errors, its repeat rule, a missing
// final message, the context check and the runtime's own timings.
func (o *Ollama) endCall(res Result, err error, last ollamaEnd, req Request, op string) (Result, error) {
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
		return res, fmt.Errorf("ollama: %s: %w", op, err)
	}
	if !last.Done && ollamaRepeatLimit(res.Steps) {
		// Ollama ended the answer by its own rule: the same token more than
		// 30 times in a row. Every token it sent is there with its
		// log-probabilities, so the call is kept, ended by the runtime and
		// flagged, and never retried: the same request repeats itself.
		res.OutputTokens = len(res.Steps)
		res.Truncated, res.StopReason = true, "repeat_limit"
		return res, nil
	}
	if !last.Done {
		// An answer that ends without its final message has no token count:
		// it was cut off, and recording its steps as a whole call would be
		// a row the record cannot vouch for.
		return res, fmt.Errorf("ollama: %s answer ended without its final message (%d steps, %d characters, done_reason %q)", op, len(res.Steps), len(res.Text), last.DoneReason)
	}
	res.PromptTokens = last.PromptEvalCount
	res.OutputTokens = last.EvalCount
	if o.cfg.Context > 0 && res.PromptTokens+req.MaxTokens > o.cfg.Context {
		// Ollama counts the prompt only as it runs it, so the check comes
		// after the call: the answer is returned with the refusal, for the
		// caller to record as what it is, never as a counted generation.
		return res, promptTooLong(res.PromptTokens, req.MaxTokens, o.cfg.Context, "counted by Ollama's own tokenizer as it evaluated the prompt")
	}
	if res.Thinking != "" {
		// Ollama counts thinking and answer tokens together in eval_count.
		res.ThinkingTokens = max(0, res.OutputTokens-len(res.Steps))
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

// ollamaRepeatRun is Ollama's rule for ending a prediction early (its
// runner aborts once one token, trimmed of space, comes more than this many
// times running); its answer then has no final message.
const ollamaRepeatRun = 30

// ollamaRepeatLimit reports whether an answer ends as Ollama's repeat rule
// ends one: the last steps, one more than the limit, all the same token once
// trimmed of space.
func ollamaRepeatLimit(steps []Step) bool {
	n := ollamaRepeatRun + 1
	if len(steps) < n {
		return false
	}
	last := strings.TrimSpace(steps[len(steps)-1].Text)
	for _, s := range steps[len(steps)-n:] {
		if strings.TrimSpace(s.Text) != last {
			return false
		}
	}
	return true
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ollamaCandidate(t api.TokenLogprob) Candidate {
	b := make([]byte, len(t.Bytes))
	for i, v := range t.Bytes {
		b[i] = byte(v)
	}
	return Candidate{ID: -1, Text: t.Token, Bytes: b, Logprob: t.Logprob}
}

// Name is "ollama".
func (o *Ollama) Name() string { return "ollama" }

// Pins returns the recorded pins.
func (o *Ollama) Pins() Pins { return o.pins }

// Endpoint is the unix socket that reaches the server.
func (o *Ollama) Endpoint() string { return o.sock }

// Sandbox is the contained process tree.
func (o *Ollama) Sandbox() *Sandbox { return o.sb }

// ModelTag is the name the pinned model was imported under.
func (o *Ollama) ModelTag() string { return o.model }

// Stop ends ollama serve and its runner.
func (o *Ollama) Stop(ctx context.Context) error {
	o.sb.Stop(5 * time.Second)
	return nil
}

// LoadedSize is the memory Ollama's scheduler counts for the loaded pinned
// model (its /api/ps size): Ollama's own estimate of the run, which the
// preflight bench sets beside the measured peak. 0 when it is not loaded.
func (o *Ollama) LoadedSize(ctx context.Context) (int64, error) {
	gctx, cancel := o.guard(ctx)
	defer cancel()
	ps, err := o.client.ListRunning(gctx)
	if err != nil {
		if o.exited() {
			return 0, o.crashed("while listing its loaded models")
		}
		return 0, fmt.Errorf("ollama: /api/ps: %w", err)
	}
	for _, m := range ps.Models {
		if m.Name == o.model || m.Model == o.model {
			return m.Size, nil
		}
	}
	return 0, nil
}

// RawChat sends a chat request straight through the api client with no driver
// logic around it; the driver-overhead benchmark compares Generate against it.
func (o *Ollama) RawChat(ctx context.Context, req *api.ChatRequest) (time.Duration, error) {
	start := time.Now()
	err := o.client.Chat(ctx, req, func(api.ChatResponse) error { return nil })
	return time.Since(start), err
}

// GenerateRaw sends a prompt with no template (raw mode), for replay: the
// recorded rendered prompt goes in as it was, with the recorded seed and
// sampling. Ollama cannot force tokens, so this regenerates and the caller
// compares; it is the closest its API allows.
func (o *Ollama) GenerateRaw(ctx context.Context, prompt string, s Sampling, maxTokens, topK int) (Result, error) {
	gctx, cancel := o.guard(ctx)
	defer cancel()
	stream := false
	req := &api.GenerateRequest{Model: o.model, Prompt: prompt, Raw: true, Stream: &stream, Logprobs: true, TopLogprobs: topK,
		Options: o.options(Request{Sampling: s, MaxTokens: maxTokens})}
	res := Result{RenderedPrompt: prompt, PeakSource: o.meter.source()}
	start := time.Now()
	var text strings.Builder
	gctx, trip := withCapTrip(gctx)
	err := o.client.Generate(gctx, req, func(r api.GenerateResponse) error {
		text.WriteString(r.Response)
		res.Steps = appendOllamaSteps(res.Steps, r.Logprobs)
		if r.Done {
			res.OutputTokens = r.EvalCount
			res.Truncated = r.DoneReason == "length"
		}
		return nil
	})
	if terr := trip.Err(); terr != nil {
		err = terr
	}
	res.Text = text.String()
	res.Wall = time.Since(start)
	if err != nil {
		if o.exited() {
			return res, o.crashed("mid-call")
		}
		return res, fmt.Errorf("ollama: raw generate: %w", err)
	}
	return res, nil
}

// manifestDigest fingerprints an imported model by what it is made of: the
// sha256 of its manifest with each layer's "from" dropped. Ollama's own
// digest hashes the manifest file as written, and "from" holds the path of
// the blob on this disk, so the same model imported into two directories
// would get two digests and a replay elsewhere would read as another stack.
func manifestDigest(modelsDir, model string) (string, error) {
	name, tag, ok := strings.Cut(model, ":")
	if !ok {
		tag = "latest"
	}
	raw, err := os.ReadFile(filepath.Join(modelsDir, "manifests", "registry.ollama.ai", "library", name, tag))
	if err != nil {
		return "", err
	}
	type layer struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	}
	var m struct {
		SchemaVersion int     `json:"schemaVersion"`
		MediaType     string  `json:"mediaType"`
		Config        layer   `json:"config"`
		Layers        []layer `json:"layers"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	if len(m.Layers) == 0 {
		return "", errors.New("manifest has no layers")
	}
	canon, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// ollamaHoldsContext refuses a context above the model's trained length:
// Ollama would quietly run the trained length instead, the downgrade a
// pinned run must never get.
func ollamaHoldsContext(model string, context int) error {
	f, err := gguf.Open(model)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", model, ErrModelFile, err)
	}
	trained, _ := f.ContextLength()
	if trained > 0 && context > 0 && uint64(context) > trained {
		return fmt.Errorf("%s: context %d: %w: Ollama lowers a context above the model's trained length (%d) to that length without saying so; pin a context of at most %d, or run this context on llama-server as its own arm",
			model, context, ErrPinNotHeld, trained, trained)
	}
	return nil
}
