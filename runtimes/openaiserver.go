package runtimes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// OpenAIServer drives a generic OpenAI-compatible server (ServerSpec) that
// rig starts in the same sandbox as its own runtimes: loopback only inside
// its own network namespace, the host read-only or absent, reached through a
// unix socket forwarded to the port rig chose. It records what the API
// gives: the top-K log-probabilities of every generated token, the time to
// the first token and between tokens from a streamed answer, and the
// token counts of its usage. A server that gives no log-probabilities is
// refused when it starts (ErrNoLogprobs): the record requires them.
type OpenAIServer struct {
	cfg   Config
	spec  ServerSpec
	sb    *Sandbox
	sock  string
	http  *http.Client
	pins  Pins
	meter peakMeter
	model string // the served model name sent with each request
}

// ErrNoLogprobs is a server that answered without log-probabilities.
var ErrNoLogprobs = errors.New("the server returns no log-probabilities")

// ErrStaleServer is a server whose executable or Python environment differs
// from what was frozen.
var ErrStaleServer = errors.New("the server differs from its pin")

// openAIServerPort is the port inside the sandbox's private namespace.
const openAIServerPort = 8080

// ServerAssets is what pins a generic server before it starts: its
// executable and the digest of its Python environment (empty for a native
// server). Freeze records them; each start compares.
type ServerAssets struct {
	Executable       string `json:"executable"`
	ExecutableSHA256 string `json:"executable_sha256"`
	EnvSHA256        string `json:"env_sha256,omitempty"`
	// Distributions are the environment's "name==version" lines.
	Distributions []string `json:"distributions,omitempty"`
}

// ReadServerAssets reads a spec's pinned assets.
func ReadServerAssets(s ServerSpec) (ServerAssets, error) {
	exe, err := serverExecutable(s)
	if err != nil {
		return ServerAssets{}, err
	}
	a := ServerAssets{Executable: exe}
	if a.ExecutableSHA256, err = FileSHA256(exe); err != nil {
		return ServerAssets{}, err
	}
	if s.PythonEnv != "" {
		if a.EnvSHA256, a.Distributions, err = PythonEnvDigest(s.PythonEnv); err != nil {
			return ServerAssets{}, err
		}
	}
	return a, nil
}

// Stale compares the assets read now with frozen ones; nil when they agree.
func (a ServerAssets) Stale(frozen ServerAssets) error {
	if frozen.ExecutableSHA256 != "" && a.ExecutableSHA256 != frozen.ExecutableSHA256 {
		return fmt.Errorf("%w: %s: sha256 %s, frozen %s (the executable changed: register the study again to pin the new one)", ErrStaleServer, a.Executable, a.ExecutableSHA256, frozen.ExecutableSHA256)
	}
	if frozen.EnvSHA256 != "" && a.EnvSHA256 != frozen.EnvSHA256 {
		return fmt.Errorf("%w: its Python environment's distributions changed (digest %s, frozen %s%s): register the study again to pin them", ErrStaleServer, a.EnvSHA256, frozen.EnvSHA256, distDiff(frozen.Distributions, a.Distributions))
	}
	return nil
}

// distDiff names what was added or removed, briefly.
func distDiff(was, now []string) string {
	in := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	var parts []string
	for _, d := range now {
		if !in(was, d) {
			parts = append(parts, "+"+d)
		}
	}
	for _, d := range was {
		if !in(now, d) {
			parts = append(parts, "-"+d)
		}
	}
	if len(parts) == 0 || was == nil {
		return ""
	}
	return ": " + strings.Join(parts[:min(len(parts), 6)], " ")
}

// StartOpenAIServer verifies the model against its pin and the server
// against frozen (zero: nothing frozen yet), starts the server in its
// sandbox on a port rig chose, waits for it, refuses a server that answers
// without log-probabilities, and holds it to the pins it reports using
// (checkCaps: the context and slots it serves, and the sampling, seed and
// stop cap of a request sent with want).
func StartOpenAIServer(ctx context.Context, spec ServerSpec, cfg Config, frozen ServerAssets, want RequestPins) (*OpenAIServer, error) {
	if err := spec.Check(); err != nil {
		return nil, fmt.Errorf("openai-server: server.%w", err)
	}
	if err := spec.CheckSlots(cfg.slots()); err != nil {
		return nil, fmt.Errorf("openai-server: server.%w", err)
	}
	if err := prepareWorkDir(&cfg); err != nil {
		return nil, err
	}
	if err := verifyModel(cfg.Model, cfg.ModelSHA256); err != nil {
		return nil, err
	}
	within, err := spec.ReadyDuration(cfg.ReadyWithin)
	if err != nil {
		return nil, err
	}
	cfg.ReadyWithin = within
	assets, err := ReadServerAssets(spec)
	if err != nil {
		return nil, err
	}
	if err := assets.Stale(frozen); err != nil {
		return nil, err
	}
	s, err := startServerSandbox(ctx, spec, cfg, assets.Executable)
	if err != nil {
		return nil, err
	}
	if err := s.afterStart(ctx, assets, want); err != nil {
		s.sb.Kill()
		return nil, err
	}
	return s, nil
}

func startServerSandbox(ctx context.Context, spec ServerSpec, cfg Config, exe string) (*OpenAIServer, error) {
	port := openAIServerPort
	if cfg.NoSandbox {
		p, err := FreeLoopbackPort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	env, err := BuildEnv(cfg.WorkDir, spec.Env)
	if err != nil {
		return nil, err
	}
	sock, err := socketPath(cfg.WorkDir, "openai-server.sock")
	if err != nil {
		return nil, err
	}
	ro := append([]string{cfg.Model}, spec.ReadOnly...)
	if spec.PythonEnv != "" {
		ro = append(ro, spec.PythonEnv)
	}
	s := &OpenAIServer{cfg: cfg, spec: spec, sock: sock}
	sb, err := StartSandbox(ctx, SandboxSpec{
		Argv: serverArgv(spec, exe, cfg, port), Env: env, Dir: cfg.WorkDir, CgroupDir: cfg.CgroupDir,
		ReadOnly: append(ro, cfg.libDirs...), Limits: RuntimeLimits(),
		Inbound: []Forward{{Socket: sock, Port: port}}, NoSandbox: cfg.NoSandbox, GPU: cfg.Offload.OnCard(),
	}, LogPath(cfg.WorkDir, OpenAIServerKind))
	if err != nil {
		return nil, err
	}
	s.sb = sb
	sb.OnCard = cfg.Offload.OnCard()
	s.http = socketClient(sock)
	s.meter = peakMeter{cgroup: cfg.CgroupDir, root: sb.RuntimePID}
	return s, nil
}

// afterStart waits for the server, learns its model name and version,
// probes for log-probabilities, holds it to the pins it reports and records
// the pins.
func (s *OpenAIServer) afterStart(ctx context.Context, assets ServerAssets, want RequestPins) error {
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := s.call(ctx, http.MethodGet, "/v1/models", nil, &models); err != nil {
		return err
	}
	s.model = s.spec.ServedModel
	if s.model == "" {
		if len(models.Data) == 0 {
			return fmt.Errorf("openai-server: /v1/models lists no model; set server.served_model")
		}
		s.model = models.Data[0].ID
	}
	if err := s.probeLogprobs(ctx); err != nil {
		return err
	}
	caps, err := s.checkCaps(ctx, want)
	if err != nil {
		return err
	}
	libs, err := LoadedLibraries(ProcessTree(s.sb.RuntimePID)...)
	if err != nil {
		return err
	}
	s.pins = Pins{
		Stack: Stack{Runtime: OpenAIServerKind, RuntimeVersion: s.version(ctx, assets), BinarySHA256: assets.ExecutableSHA256,
			BuildFlags: strings.Join(s.spec.Command, " "), Libraries: libs, EnvSHA256: assets.EnvSHA256},
		ModelName: s.cfg.ModelName, ModelFile: s.cfg.Model, ModelSHA256: s.cfg.ModelSHA256,
		Context: s.cfg.Context, Slots: s.cfg.slots(), Threads: s.cfg.Threads,
		ChatTemplate: "the server's own", ServedModel: s.model,
		Sandboxed: s.sb.Containment.Sandboxed, NoSandbox: s.cfg.NoSandbox,
		Containment: s.sb.Containment, Machine: ReadMachine(), Offload: s.cfg.Offload,
		ServerCaps: CapsSummary(caps), ServerRequest: s.spec.RequestPin(),
	}
	return nil
}

// version is what the server says it is, where it says: vLLM and SGLang
// answer /version, llama-server /props (build_info). A server that says
// nothing (llama-cpp-python) is named by what pins it, and says so: rig
// never runs the executable outside its sandbox to ask.
func (s *OpenAIServer) version(ctx context.Context, assets ServerAssets) string {
	var v struct {
		Version   string `json:"version"`
		BuildInfo string `json:"build_info"`
	}
	for _, path := range []string{"/version", "/props"} {
		if err := s.call(ctx, http.MethodGet, path, nil, &v); err == nil && (v.Version != "" || v.BuildInfo != "") {
			if v.Version != "" {
				return v.Version
			}
			return v.BuildInfo
		}
	}
	if assets.EnvSHA256 != "" {
		return "not reported; python environment sha256:" + assets.EnvSHA256[:12]
	}
	return "not reported; executable sha256:" + assets.ExecutableSHA256[:min(12, len(assets.ExecutableSHA256))]
}

// probeLogprobs asks for one token with its alternatives and refuses a
// server that answers without them.
func (s *OpenAIServer) probeLogprobs(ctx context.Context) error {
	req := Request{MaxTokens: 1, TopK: 2, Messages: []Message{{Role: "user", Content: "Say yes."}}, Prompt: ""}
	if !s.spec.Speaks(APIChat) {
		req.Messages, req.Prompt = nil, "Yes"
	}
	res, err := s.Generate(ctx, req)
	if err != nil {
		return fmt.Errorf("openai-server: the first call failed: %w", err)
	}
	if len(res.Steps) == 0 || len(res.Steps[0].Top) == 0 {
		return fmt.Errorf("openai-server: %w (asked with logprobs and top_logprobs %d, it gave none): rig's generation record requires the top-K of every token; start the server with log-probabilities on, or run the model on llama-server or Ollama", ErrNoLogprobs, req.TopK)
	}
	return nil
}

// waitReady polls the spec's ready path until it answers 200, and fails
// fast with the server's last words if it exits first.
func (s *OpenAIServer) waitReady(ctx context.Context) error {
	path := s.spec.Ready
	if path == "" {
		path = "/v1/models"
	}
	deadline := time.Now().Add(s.cfg.ReadyWithin)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://server"+path, nil)
		if resp, err := s.http.Do(req); err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.sb.Done():
			return fmt.Errorf("openai-server %s: %w while loading (%v):\n%s", s.spec.Command[0], ErrCrashed, s.sb.ExitError(), s.sb.LogTail(8))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("openai-server %s: %w within %s (polling %s):\n%s", s.spec.Command[0], ErrNotReady, s.cfg.ReadyWithin, path, s.sb.LogTail(8))
		}
	}
}

// Name is "openai-server".
func (s *OpenAIServer) Name() string { return OpenAIServerKind }

// Pins returns the recorded pins.
func (s *OpenAIServer) Pins() Pins { return s.pins }

// Endpoint is the unix socket that reaches the server.
func (s *OpenAIServer) Endpoint() string { return s.sock }

// Sandbox is the contained process tree.
func (s *OpenAIServer) Sandbox() *Sandbox { return s.sb }

// ServedModel is the model name the server is called with.
func (s *OpenAIServer) ServedModel() string { return s.model }

// Stop ends the server and everything it started.
func (s *OpenAIServer) Stop(ctx context.Context) error {
	s.sb.Stop(5 * time.Second)
	return nil
}
