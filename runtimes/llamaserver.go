package runtimes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"rig/internal/cgroup"
	"rig/internal/gguf"
	"rig/internal/offload"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LlamaServer drives a private llama-server: Config.Slots slots (one by
// default), each with the pinned context, no prompt cache
// between calls, the model's own jinja chat template, reached through a unix
// socket forwarded into its sandbox.
type LlamaServer struct {
	cfg    Config
	sb     *Sandbox
	sock   string
	http   *http.Client
	pins   Pins
	meter  peakMeter
	tmpl   string // the model's chat template, as the server reports it
	effort bool   // the template reads a graded effort parameter
	// template says which chat format the pins hold: the GGUF's own, or the family's.
	template string
}

// llamaServerPort is the port inside the sandbox; the namespace is private, so
// it cannot collide with anything on the host.
const llamaServerPort = 8080

// StartLlamaServer verifies the model against its pin, starts llama-server in
// its sandbox and waits until it has loaded the model.
func StartLlamaServer(ctx context.Context, cfg Config) (*LlamaServer, error) {
	if err := prepareWorkDir(&cfg); err != nil {
		return nil, err
	}
	if err := verifyModel(cfg.Model, cfg.ModelSHA256); err != nil {
		return nil, err
	}
	port := llamaServerPort
	if cfg.NoSandbox {
		p, err := FreeLoopbackPort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	args := llamaServerArgs(cfg, port)
	own, ft, err := chatTemplate(cfg.Model)
	if err != nil {
		return nil, err
	}
	if !own {
		tf := filepath.Join(cfg.WorkDir, "chat-template.jinja")
		if err := os.WriteFile(tf, []byte(ft.Jinja), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--chat-template-file", tf)
	}
	env, err := BuildEnv(cfg.WorkDir, nil)
	if err != nil {
		return nil, err
	}
	sock, err := socketPath(cfg.WorkDir, "llama-server.sock")
	if err != nil {
		return nil, err
	}
	s := &LlamaServer{cfg: cfg, sock: sock, template: "the GGUF's own"}
	if !own {
		s.template = ft.Name
	}
	sb, err := StartSandbox(ctx, SandboxSpec{
		Argv: args, Env: env, Dir: cfg.WorkDir, CgroupDir: cfg.CgroupDir,
		ReadOnly: append([]string{cfg.Model}, cfg.libDirs...), Limits: RuntimeLimits(),
		Inbound: []Forward{{Socket: s.sock, Port: port}}, NoSandbox: cfg.NoSandbox, GPU: cfg.Offload.OnCard(),
	}, LogPath(cfg.WorkDir, "llama-server"))
	if err != nil {
		return nil, err
	}
	s.sb = sb
	sb.OnCard = cfg.Offload.OnCard()
	s.http = socketClient(s.sock)
	s.meter = peakMeter{cgroup: cfg.CgroupDir, root: sb.RuntimePID}
	if err := s.waitReady(ctx); err != nil {
		sb.Kill()
		if line := cardAllocationFailure(sb.logPath); line != "" && cfg.Offload.OnCard() {
			// The model, its cache or its buffers would not fit the card
			// with the pinned offload: a failure at this card, not an error.
			return nil, fmt.Errorf("llama-server with %s: %w: the card could not hold what the pin puts there (%s)", cfg.Model, ErrOffloadNotHeld, line)
		}
		return nil, err
	}
	if err := s.readPins(ctx); err != nil {
		sb.Kill()
		return nil, err
	}
	if err := s.holdOffload(); err != nil {
		sb.Kill()
		return nil, err
	}
	return s, nil
}

// llamaServerArgs is llama-server's command line for cfg, listening on port:
// the pinned context, threads and cache, with every silent fallback and
// convenience turned off.
func llamaServerArgs(cfg Config, port int) []string {
	args := []string{cfg.Binary,
		"--model", cfg.Model,
		"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		// N slots, each with the whole pinned context: with --parallel set
		// the server keeps one KV stream per slot (no --kv-unified) of
		// ctx-size / N cells, so the total is N × the pinned context.
		// Continuous batching is its default: every busy slot decodes in
		// the same batch.
		"--parallel", strconv.Itoa(cfg.slots()),
		"--ctx-size", strconv.Itoa(cfg.slots() * cfg.Context),
		"--threads", strconv.Itoa(cfg.Threads),
		"--jinja", "--no-webui", "--offline",
		"--cache-type-k", cfg.KVCacheType, "--cache-type-v", cfg.KVCacheType,
		"--cache-reuse", "0", "--cache-ram", "0",
		// Without this llama-server shrinks the context to fit memory: the
		// silent downgrade a pinned run must never get.
		"--fit", "off",
		// Waiting threads sleep instead of spinning: with spinning, a runtime
		// sharing its cores with anything else slows down many times over.
		"--poll", "0",
	}
	if !cfg.WeightRepack {
		args = append(args, "--no-repack")
	}
	if !cfg.PromptCheckpoints {
		args = append(args, "--ctx-checkpoints", "0")
	}
	args = append(args, llamaServerOffloadArgs(cfg.Offload)...)
	if cfg.VerboseLog || cfg.Offload.Backend == offload.BackendCUDA {
		// The load report (layers offloaded, buffers per device) is logged
		// at this level only, and a card's pin is checked against it.
		args = append(args, "--log-verbosity", "4")
	}
	if cfg.CgroupDir != "" {
		// Inside a simulated card the weights are read into the runtime's own
		// memory instead of mapped: mapped pages can be dropped and re-read,
		// so a too-small card would thrash instead of failing, and the
		// preflight is calibrated on this load mode.
		args = append(args, "--load-mode", "none")
	}
	return args
}

// holdOffload reads where the server put the model and refuses a placement
// other than the pin's; the report goes on the pins either way.
func (s *LlamaServer) holdOffload() error {
	s.pins.Offload = s.cfg.Offload
	rep, err := holdOffload("llama-server", s.cfg.Model, s.cfg.Offload, s.sb.logPath)
	s.pins.Load = rep
	return err
}

func prepareWorkDir(cfg *Config) error {
	if cfg.WorkDir == "" {
		return errors.New("runtime config: WorkDir is empty")
	}
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, "tmp"), 0o700); err != nil {
		return err
	}
	if cfg.Context <= 0 {
		cfg.Context = 4096
	}
	if cfg.Threads <= 0 {
		cfg.Threads = defaultThreads()
	}
	if cfg.KVCacheType == "" {
		cfg.KVCacheType = "f16"
	}
	if cfg.ReadyWithin == 0 {
		cfg.ReadyWithin = 3 * time.Minute
	}
	return nil
}

// defaultThreads leaves one core to everything else (rig, the governor, the
// grader, the OS). A runtime whose threads outnumber the free cores stalls at
// every barrier: measured here, SmolLM2 fell from 19 to 0.3 tokens/s when two
// threads shared two busy cores.
func defaultThreads() int {
	return max(1, len(processTreeCPUs())-1)
}

// processTreeCPUs lists the CPUs rig's process tree may use (its cpuset).
func processTreeCPUs() []int {
	cpus, _ := cgroup.CPUs()
	return cpus
}

// FreeLoopbackPort asks the kernel for a free port on 127.0.0.1 and keeps
// it from being handed out again for a while, so that the server it is for
// can still bind it a moment later.
//
// Why: the kernel picks bind(0) ports at random, and a port just closed is
// as likely as any other. With tests and runtimes starting side by side, a
// port chosen here was seen taken by another's bind(0) before its server
// bound it (CI: the Temporal dev server exited at start). A connection
// accepted and closed from this side leaves the port in TIME_WAIT for about
// a minute, while the kernel hands it to neither bind(0) nor connect(); a
// server binding it by number with SO_REUSEADDR (Go's listeners,
// llama-server) is not held back.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	client, err := net.DialTCP("tcp", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		return 0, fmt.Errorf("reserving loopback port %d: %w", port, err)
	}
	defer client.Close()
	server, err := l.Accept()
	if err != nil {
		return 0, fmt.Errorf("reserving loopback port %d: %w", port, err)
	}
	// The server's side closes first: TIME_WAIT stays on the listening port.
	server.Close()
	return port, nil
}

func socketClient(sock string) *http.Client {
	return &http.Client{Transport: cappedTransport{&http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		// A fresh connection per call: calls that reused a kept-alive
		// connection were seen to stall for tens of seconds before their
		// first token; a unix-socket connect costs microseconds.
		DisableKeepAlives: true,
		// The runtime is contained and may be hostile: header lines are
		// small (net/http's default allows 10 MiB).
		MaxResponseHeaderBytes: 64 << 10,
	}}}
}

// cappedTransport holds every answer read through a runtime's socket to
// maxRuntimeResponseBytes, whoever reads it: rig's own drivers read through
// readCapped as well, but Ollama's client library reads its answers whole
// (io.ReadAll) or line by line with no bound on the lines, and this is the
// one place every byte from the socket passes.
type cappedTransport struct{ rt http.RoundTripper }

func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	trip, _ := req.Context().Value(capTripKey{}).(*capTrip)
	resp.Body = &cappedBody{body: resp.Body, left: maxRuntimeResponseBytes, said: resp.ContentLength, trip: trip,
		what: "the answer to " + req.Method + " " + req.URL.Path + " from a runtime in its sandbox"}
	return resp, nil
}

// cappedBody reads at most maxRuntimeResponseBytes of an answer; one byte
// past them (or a length said past them) is ErrTooLarge.
type cappedBody struct {
	body io.ReadCloser
	left int64
	said int64
	what string
	trip *capTrip
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.said > maxRuntimeResponseBytes {
		return 0, b.trip.set(fmt.Errorf("%w (it said %d bytes)", tooLarge(b.what, maxRuntimeResponseBytes, "bytes", "maxRuntimeResponseBytes"), b.said))
	}
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.body.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, b.trip.set(tooLarge(b.what, maxRuntimeResponseBytes, "bytes", "maxRuntimeResponseBytes"))
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }

// capTrip receives the refusal of an answer cut at its cap, for a caller
// whose reader drops read errors: Ollama's client library ends a streamed
// answer quietly on one, or reports the cut line as the error. The caller
// puts it in the request's context (withCapTrip) and asks it after the call.
type capTrip struct {
	mu  sync.Mutex
	err error
}

type capTripKey struct{}

func withCapTrip(ctx context.Context) (context.Context, *capTrip) {
	t := &capTrip{}
	return context.WithValue(ctx, capTripKey{}, t), t
}

// set keeps the first refusal and returns it; a nil trip only returns it.
func (t *capTrip) set(err error) error {
	if t != nil {
		t.mu.Lock()
		if t.err == nil {
			t.err = err
		}
		t.mu.Unlock()
	}
	return err
}

// Err is the refusal of an answer cut at the cap during the call, or nil.
func (t *capTrip) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// waitReady polls /health until the model is loaded, and fails fast with the
// server's own last words if it exits instead.
func (s *LlamaServer) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(s.cfg.ReadyWithin)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://llama/health", nil)
		resp, err := s.http.Do(req)
		if err == nil {
			// Only the status matters; a body that never ends must not
			// hold the wait past its deadline.
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-s.sb.Done():
			return fmt.Errorf("llama-server with %s: %w while loading (%v):\n%s", s.cfg.Model, ErrCrashed, s.sb.ExitError(), s.sb.LogTail(8))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("llama-server with %s: %w within %s:\n%s", s.cfg.Model, ErrNotReady, s.cfg.ReadyWithin, s.sb.LogTail(8))
		}
	}
}

func (s *LlamaServer) readPins(ctx context.Context) error {
	var props struct {
		ChatTemplate string `json:"chat_template"`
		BuildInfo    string `json:"build_info"`
		TotalSlots   int    `json:"total_slots"`
		Defaults     struct {
			SlotContext int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if err := s.call(ctx, "GET", "/props", nil, &props); err != nil {
		return err
	}
	if err := s.holdSlots(props.TotalSlots, props.Defaults.SlotContext, trainedContext(s.cfg.Model)); err != nil {
		return err
	}
	s.tmpl = props.ChatTemplate
	s.effort = strings.Contains(s.tmpl, "reasoning_effort")
	stack, err := readStack("llama-server", s.cfg, props.BuildInfo, s.sb.RuntimePID)
	if err != nil {
		return err
	}
	s.pins = Pins{
		Stack:     stack,
		ModelName: s.cfg.ModelName, ModelFile: s.cfg.Model, ModelSHA256: s.cfg.ModelSHA256,
		Context: s.cfg.Context, Slots: s.cfg.slots(), KVCacheType: s.cfg.KVCacheType, Threads: s.cfg.Threads, WeightRepack: onOff(s.cfg.WeightRepack),
		PromptCheckpoints: onOff(s.cfg.PromptCheckpoints),
		ChatTemplate:      s.template,
		Sandboxed:         s.sb.Containment.Sandboxed, NoSandbox: s.cfg.NoSandbox,
		Containment: s.sb.Containment, Machine: ReadMachine(), CPU: readCPUBackend("llama-server", s.sb.logPath, stack.Libraries),
	}
	if s.cfg.Offload.Backend == offload.BackendCUDA {
		// Only a card's run says its backend: the CPU path's machine line
		// stays what every receipt before offload pins carried.
		s.pins.Machine.Backend = offload.BackendCUDA
	}
	return nil
}

// holdSlots refuses a server that does not serve the pinned slots with the
// whole pinned context each, as it reports them (/props: total_slots and a
// slot's n_ctx): the server divides its cache among the slots, and a slot
// with less than the pin would fail or cut a request that fits it. A slot
// is held to the model's trained length where the pin is longer (trained,
// 0 when the file does not say): the server caps a slot there whatever the
// slot count, as it always has with one.
func (s *LlamaServer) holdSlots(slots, slotContext, trained int) error {
	want := s.cfg.Context
	if trained > 0 && trained < want {
		want = trained
	}
	if slots != s.cfg.slots() || slotContext < want {
		return fmt.Errorf("llama-server with %s: %w: it serves %d slots of %d tokens, the pins ask for %d of %d",
			s.cfg.Model, ErrPinNotHeld, slots, slotContext, s.cfg.slots(), want)
	}
	return nil
}

// trainedContext is the model's trained context length from its GGUF, or
// 0 when it cannot be read.
func trainedContext(model string) int {
	f, err := gguf.Open(model)
	if err != nil {
		return 0
	}
	n, _ := f.ContextLength()
	return int(n)
}

// call sends one JSON request over the socket. A runtime that dies while rig
// waits gives ErrCrashed, not a hang.
func (s *LlamaServer) call(ctx context.Context, method, path string, body, out any) error {
	rd, err := jsonBody(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.sb.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, method, "http://llama"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		if s.sb.exitedWithin(2 * time.Second) {
			return fmt.Errorf("llama-server %s: %w mid-call (%v):\n%s", path, ErrCrashed, s.sb.ExitError(), s.sb.LogTail(5))
		}
		return fmt.Errorf("llama-server %s: %w", path, err)
	}
	defer resp.Body.Close()
	return decodeRuntimeAnswer(resp, "llama-server", path, out)
}

// jsonBody is a request's body as JSON, or none for a nil body.
func jsonBody(body any) (io.Reader, error) {
	if body == nil {
		return nil, nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// decodeRuntimeAnswer reads and decodes a runtime's JSON answer into out
// (nil: checked, not kept). The server runs in the sandbox: its answer is
// read, and decoded, only within the caps (see maxRuntimeResponseBytes).
// Past them the call fails, and with it the trial; what came is not read
// further. server names the runtime in errors ("llama-server").
func decodeRuntimeAnswer(resp *http.Response, server, path string, out any) error {
	what := "the answer of " + server + " " + path + " (the runtime, in its sandbox)"
	if resp.ContentLength > maxRuntimeResponseBytes {
		return fmt.Errorf("%s %s: %w (it said %d bytes)", server, path, tooLarge(what, maxRuntimeResponseBytes, "bytes", "maxRuntimeResponseBytes"), resp.ContentLength)
	}
	b, err := readCapped(resp.Body, resp.ContentLength, maxRuntimeResponseBytes, "maxRuntimeResponseBytes", what)
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", server, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", server, path, resp.StatusCode, quote(b))
	}
	if err := checkJSONShape(b, runtimeAnswerShape, what); err != nil {
		return fmt.Errorf("%s %s: %w", server, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", server, path, err)
		}
	}
	return nil
}

type lsCandidate struct {
	ID      int     `json:"id"`
	Token   string  `json:"token"`
	RawB    []int   `json:"bytes"`
	Logprob float64 `json:"logprob"`
}

func (c lsCandidate) candidate() Candidate {
	b := make([]byte, len(c.RawB))
	for i, v := range c.RawB {
		b[i] = byte(v)
	}
	return Candidate{ID: c.ID, Text: c.Token, Bytes: b, Logprob: c.Logprob}
}

type lsCompletion struct {
	Content string `json:"content"`
	Tokens  []int  `json:"tokens"`
	Probs   []struct {
		lsCandidate
		Top []lsCandidate `json:"top_logprobs"`
	} `json:"completion_probabilities"`
	StopType        string `json:"stop_type"`
	Truncated       bool   `json:"truncated"`
	TokensPredicted int    `json:"tokens_predicted"`
	TokensEvaluated int    `json:"tokens_evaluated"`
	Timings         struct {
		PromptN     int     `json:"prompt_n"`
		PromptMS    float64 `json:"prompt_ms"`
		PromptPerS  float64 `json:"prompt_per_second"`
		PredictedN  int     `json:"predicted_n"`
		PredictedMS float64 `json:"predicted_ms"`
		PredPerS    float64 `json:"predicted_per_second"`
	} `json:"timings"`
}

// Render applies the model's own chat template (the server's jinja) and
// tokenizes the result exactly as /completion would.
func (s *LlamaServer) Render(ctx context.Context, msgs []Message, effort EffortRecord) (string, []int, error) {
	body := map[string]any{"messages": msgs}
	if effort.Supported && effort.Label != "" {
		body["chat_template_kwargs"] = map[string]any{"reasoning_effort": effort.Label}
	}
	var tmpl struct {
		Prompt string `json:"prompt"`
	}
	if err := s.call(ctx, "POST", "/apply-template", body, &tmpl); err != nil {
		return "", nil, err
	}
	ids, err := s.Tokenize(ctx, tmpl.Prompt)
	if err != nil {
		return "", nil, err
	}
	return tmpl.Prompt, ids, nil
}

// Tokenize turns a rendered prompt into token ids as Generate sends it: the
// model's special tokens parsed, its BOS added where the vocabulary asks.
// Replay checks a kept rendered prompt against its kept ids with it.
func (s *LlamaServer) Tokenize(ctx context.Context, text string) ([]int, error) {
	var tok struct {
		Tokens []int `json:"tokens"`
	}
	if err := s.call(ctx, "POST", "/tokenize", map[string]any{"content": text, "add_special": true, "parse_special": true}, &tok); err != nil {
		return nil, err
	}
	return tok.Tokens, nil
}

// Detokenize returns the bytes the pinned tokenizer spells for ids, each
// token's piece in order (special tokens spelled out), which is how
// llama-server builds a completion's content.
func (s *LlamaServer) Detokenize(ctx context.Context, ids []int) ([]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out struct {
		Content string `json:"content"`
	}
	if err := s.call(ctx, "POST", "/detokenize", map[string]any{"tokens": ids}, &out); err != nil {
		return nil, err
	}
	return []byte(out.Content), nil
}

func (s *LlamaServer) effortFor(e Effort) EffortRecord {
	rec := EffortRecord{Label: e.Level, Graded: s.effort, Supported: s.effort}
	if s.effort && e.Level != "" {
		rec.Raw = fmt.Sprintf(`chat_template_kwargs.reasoning_effort=%q`, e.Level)
	}
	return rec
}

// Generate renders the messages with the model's template, sends the prompt as
// token ids to /completion with n_probs = K, and returns tokens, log-probs,
// timings and the peak memory of the call.
func (s *LlamaServer) Generate(ctx context.Context, req Request) (Result, error) {
	if req.TopK <= 0 {
		req.TopK = 5
	}
	res := Result{CallID: req.CallID, Effort: s.effortFor(req.Effort), PeakSource: s.meter.source()}
	prompt := req.PromptTokens
	if len(prompt) == 0 && req.Prompt != "" {
		// A plain completion: the model's tokenizer, no template.
		ids, err := s.Tokenize(ctx, req.Prompt)
		if err != nil {
			return res, err
		}
		res.RenderedPrompt, prompt = req.Prompt, ids
	} else if len(prompt) == 0 {
		text, ids, err := s.Render(ctx, req.Messages, res.Effort)
		if err != nil {
			return res, err
		}
		res.RenderedPrompt, prompt = text, ids
	}
	res.PromptTokenIDs = prompt
	if s.cfg.Context > 0 && len(prompt)+req.MaxTokens > s.cfg.Context {
		return res, promptTooLong(len(prompt), req.MaxTokens, s.cfg.Context, "counted by llama-server's own tokenizer before generating")
	}
	body := map[string]any{
		"prompt":              prompt,
		"n_predict":           req.MaxTokens,
		"n_probs":             req.TopK,
		"post_sampling_probs": false,
		"return_tokens":       true,
		"cache_prompt":        false,
		"stream":              false,
		"temperature":         req.Sampling.Temperature,
		"top_k":               req.Sampling.TopK,
		"top_p":               orOne(req.Sampling.TopP),
		"min_p":               req.Sampling.MinP,
		"seed":                req.Sampling.Seed,
		"samplers":            []string{"top_k", "top_p", "min_p", "temperature"},
	}
	if len(req.Stop) > 0 {
		body["stop"] = req.Stop
	}
	if req.Grammar != "" {
		body["grammar"] = req.Grammar
	}
	if req.Slot > 0 {
		body["id_slot"] = req.Slot - 1
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
	res.Text = out.Content
	res.PromptTokens = out.Timings.PromptN
	if res.PromptTokens == 0 {
		res.PromptTokens = len(prompt)
	}
	res.OutputTokens = out.TokensPredicted
	for _, p := range out.Probs {
		st := Step{Candidate: p.lsCandidate.candidate()}
		for _, t := range p.Top {
			st.Top = append(st.Top, t.candidate())
		}
		res.Steps = append(res.Steps, st)
	}
	res.LogprobsMissing = max(0, res.OutputTokens-len(res.Steps))
	res.Truncated = out.StopType == "limit"
	res.StopReason = "stop"
	if res.Truncated {
		res.StopReason = "length"
	}
	res.Timings = Timings{
		PromptTokens: out.Timings.PromptN, PromptDuration: msDur(out.Timings.PromptMS), PromptPerSecond: out.Timings.PromptPerS,
		OutputTokens: out.Timings.PredictedN, OutputDuration: msDur(out.Timings.PredictedMS), OutputPerSecond: out.Timings.PredPerS,
	}
	return res, nil
}

func orOne(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// Name is "llama-server".
func (s *LlamaServer) Name() string { return "llama-server" }

// Pins returns the recorded pins.
func (s *LlamaServer) Pins() Pins { return s.pins }

// Endpoint is the unix socket that reaches the server.
func (s *LlamaServer) Endpoint() string { return s.sock }

// Sandbox is the contained process tree.
func (s *LlamaServer) Sandbox() *Sandbox { return s.sb }

// ChatTemplate is the model's template as the server uses it.
func (s *LlamaServer) ChatTemplate() string { return s.tmpl }

// Stop ends the server and everything it started.
func (s *LlamaServer) Stop(ctx context.Context) error {
	s.sb.Stop(5 * time.Second)
	return nil
}

// Raw sends a request straight to the server with no driver logic around it;
// the driver-overhead benchmark compares Generate against it.
func (s *LlamaServer) Raw(ctx context.Context, path string, body any) (time.Duration, error) {
	start := time.Now()
	err := s.call(ctx, "POST", path, body, nil)
	return time.Since(start), err
}
