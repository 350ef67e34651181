package preflight

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/ollama/ollama/api"
)

// ollamaStore is a private Ollama home with the bench models imported once,
// outside any reservation: importing copies the GGUF into Ollama's blob
// store, and that copy is not part of running the model.
type ollamaStore struct {
	dir   string
	tags  map[string]string // model name → the tag it was imported under
	blobs map[string]string // model name → its file in the blob store
}

func (s *ollamaStore) Close() error { return os.RemoveAll(s.dir) }

// ollamaEnv is a clean environment for a private `ollama serve`: nothing of
// the caller's OLLAMA_* settings leaks in. Flash attention is on because
// Ollama ignores a quantized KV-cache type without it.
func ollamaEnv(dir string, port int, p Profile) []string {
	env := map[string]string{
		"PATH":                     os.Getenv("PATH"),
		"HOME":                     filepath.Join(dir, "home"),
		"OLLAMA_HOST":              "127.0.0.1:" + strconv.Itoa(port),
		"OLLAMA_MODELS":            filepath.Join(dir, "models"),
		"OLLAMA_NUM_PARALLEL":      strconv.Itoa(p.slots()),
		"OLLAMA_MAX_LOADED_MODELS": "1",
		"OLLAMA_KEEP_ALIVE":        "-1",
		"OLLAMA_FLASH_ATTENTION":   "1",
		"OLLAMA_KV_CACHE_TYPE":     p.kvType(),
		"OLLAMA_NO_CLOUD":          "1",
		"OLLAMA_NOPRUNE":           "1",
	}
	if p.Context > 0 {
		env["OLLAMA_CONTEXT_LENGTH"] = strconv.Itoa(p.Context)
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// ollamaServer is one running `ollama serve` and its log.
type ollamaServer struct {
	cmd    *exec.Cmd
	done   chan error
	log    *syncBuffer
	client *api.Client
}

// startOllama starts cmd (ollama serve, already given its environment) in
// its own process group and waits until it answers.
func startOllama(ctx context.Context, cmd *exec.Cmd, port int) (*ollamaServer, error) {
	s := &ollamaServer{cmd: cmd, done: make(chan error, 1), log: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("preflight: start ollama serve: %w", err)
	}
	go func() { s.done <- cmd.Wait() }()
	base, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(port))
	s.client = api.NewClient(base, &http.Client{Timeout: 3 * time.Minute})
	for {
		if err := s.client.Heartbeat(ctx); err == nil {
			return s, nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			return s, fmt.Errorf("ollama serve exited before ready (%v): %s", err, tail(s.log.String(), 600))
		case <-ctx.Done():
			s.stop()
			return s, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// exited reports whether the server has ended, without waiting.
func (s *ollamaServer) exited() (bool, error) {
	select {
	case err := <-s.done:
		s.done <- err
		return true, err
	default:
		return false, nil
	}
}

// stop ends the server and its runner: they share the process group.
func (s *ollamaServer) stop() {
	if gone, _ := s.exited(); gone {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.done <- <-s.done
	}
}

// importOllama creates a private Ollama home and imports every bench model.
func importOllama(ctx context.Context, opts BenchOptions) (*ollamaStore, error) {
	dir, err := os.MkdirTemp("", "rig-bench-ollama-")
	if err != nil {
		return nil, fmt.Errorf("preflight: bench: %w", err)
	}
	st := &ollamaStore{dir: dir, tags: map[string]string{}, blobs: map[string]string{}}
	for _, sub := range []string{"home", "models"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			st.Close()
			return nil, fmt.Errorf("preflight: bench: %w", err)
		}
	}
	port, err := freePort()
	if err != nil {
		st.Close()
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ictx, opts.OllamaBin, "serve")
	cmd.Env = ollamaEnv(dir, port, Profile{})
	srv, err := startOllama(ictx, cmd, port)
	if err != nil {
		st.Close()
		return nil, err
	}
	defer srv.stop()
	for _, name := range slices.Sorted(maps.Keys(opts.Models)) {
		path := opts.Models[name]
		sum, err := fileSHA256(path)
		if err != nil {
			st.Close()
			return nil, err
		}
		if err := createOllamaModel(ictx, srv.client, name, path, sum); err != nil {
			st.Close()
			return nil, fmt.Errorf("%w: %s", err, tail(srv.log.String(), 400))
		}
		st.tags[name] = "rig-bench-" + name + ":pinned"
		st.blobs[name] = filepath.Join(dir, "models", "blobs", "sha256-"+sum)
	}
	return st, nil
}

func createOllamaModel(ctx context.Context, c *api.Client, name, path, sum string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("preflight: bench: %w", err)
	}
	defer f.Close()
	if err := c.CreateBlob(ctx, "sha256:"+sum, f); err != nil {
		return fmt.Errorf("preflight: bench: ollama: upload %s: %w", path, err)
	}
	req := &api.CreateRequest{Model: "rig-bench-" + name + ":pinned", Files: map[string]string{filepath.Base(path): "sha256:" + sum}}
	if err := c.Create(ctx, req, func(api.ProgressResponse) error { return nil }); err != nil {
		return fmt.Errorf("preflight: bench: ollama: import %s: %w", path, err)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("preflight: bench: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("preflight: bench: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// measureOllama starts `ollama serve` in a fresh reservation (its runner is
// its child, so the whole tree is inside), loads the model at the profile's
// context and KV type with one raw completion, and returns the group's peak,
// Ollama's own size for the loaded model (/api/ps) and the allocations its
// log reports.
func measureOllama(ctx context.Context, opts BenchOptions, st *ollamaStore, name string, p Profile) (peak, own Size, bufs Buffers, err error) {
	ctx, cancel := context.WithTimeout(ctx, opts.RunTimeout)
	defer cancel()
	if err := warmFile(st.blobs[name]); err != nil {
		return 0, 0, Buffers{}, err
	}
	r, err := Reserve(ctx, opts.Limit)
	if err != nil {
		return 0, 0, Buffers{}, err
	}
	defer r.Close()
	port, err := freePort()
	if err != nil {
		return 0, 0, Buffers{}, err
	}
	cmd := r.Command(ctx, opts.OllamaBin, "serve")
	cmd.Env = ollamaEnv(st.dir, port, p)
	srv, err := startOllama(ctx, cmd, port)
	if err != nil {
		peak, _ = r.Peak()
		return peak, 0, Buffers{}, err
	}
	defer srv.stop()
	stream := false
	// Raw: the prompt goes in as it is, so the template cannot change its length.
	req := &api.GenerateRequest{Model: st.tags[name], Prompt: benchPrompt(p.Context), Raw: true, Stream: &stream,
		Options: map[string]any{"num_ctx": p.Context * p.slots(), "num_predict": 16, "temperature": 0, "num_thread": 2}}
	genErr := srv.client.Generate(ctx, req, func(api.GenerateResponse) error { return nil })
	bufs = ollamaBuffers(srv.log.String())
	if ps, err := srv.client.ListRunning(ctx); err == nil {
		for _, m := range ps.Models {
			if m.Name == st.tags[name] || m.Model == st.tags[name] {
				own = Size(m.Size)
			}
		}
	} else {
		opts.Logger.Warn("ollama /api/ps", "err", err)
	}
	if own == 0 {
		own = ollamaTotal(srv.log.String()) // the same number, from the log
	}
	peak, perr := r.Peak()
	if genErr != nil {
		oom, _ := r.OOM()
		gone, werr := srv.exited()
		return peak, own, bufs, fmt.Errorf("ollama generate: %w (server exited %v: %v; oom kills %d): %s", genErr, gone, werr, oom.Kills, tail(srv.log.String(), 600))
	}
	return peak, own, bufs, perr
}

var ollamaTotalLine = regexp.MustCompile(`msg="total memory" size="([0-9.]+ [KMGT]?i?B)"`)

// ollamaTotal is the last "total memory" Ollama logged for a load: its own
// estimate of the loaded model, the size /api/ps reports.
func ollamaTotal(log string) Size {
	m := ollamaTotalLine.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		return 0
	}
	s, _ := ParseSize(m[len(m)-1][1])
	return s
}

var ollamaDeviceLine = regexp.MustCompile(`msg="(model weights|kv cache|compute graph)" device=\S+ size="([0-9.]+ [KMGT]?i?B)"`)

// ollamaBuffers reads what Ollama's log says it allocated: llama.cpp's own
// buffer lines when the model runs on the llama.cpp runner, else the last
// "model weights", "kv cache" and "compute graph" lines of Ollama's engine
// (it logs them once per load step; the last is the committed load).
func ollamaBuffers(log string) Buffers {
	if b := parseBuffers(log); b.Model > 0 {
		return b
	}
	var b Buffers
	last := ""
	for _, m := range ollamaDeviceLine.FindAllStringSubmatch(log, -1) {
		s, err := ParseSize(m[2])
		if err != nil {
			continue
		}
		if m[1] == "model weights" && last != "" && last != m[1] {
			b = Buffers{} // a new load step starts with its weights, one line per device
		}
		last = m[1]
		switch m[1] {
		case "model weights":
			b.Model += s
		case "kv cache":
			b.KV += s
		case "compute graph":
			b.Compute += s
		}
	}
	return b
}
