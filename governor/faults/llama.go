package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"rig/governor"
	"rig/internal/provision"
	"rig/runtimes"
)

// ErrNotInstalled is returned when installed.env or an entry it needs is
// missing: the real-runtime classes cannot run.
var ErrNotInstalled = errors.New("real runtime not installed")

// suiteModel is the model the real-runtime classes and the soak run.
const suiteModel = "smollm2-135m-instruct"

// realRuntime is the provisioned llama-server build and model that the
// real-runtime classes and the soak start, through the runtime's own
// launcher, as a trial starts them.
type realRuntime struct {
	build runtimes.Build
	model provision.Model
	mu    sync.Mutex
	// unsandboxed, once set, says why the runtime runs without its network
	// namespace: this machine cannot make one, and the governor's job is
	// stopping the process tree, not containing it.
	unsandboxed string
}

// loadRuntime reads the provisioned llama-server and model from envFile.
func loadRuntime(envFile string) (*realRuntime, error) {
	in, err := provision.LoadFile(envFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	b, err := runtimes.BuildOf(in, "llama-server")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	m, err := in.Model(suiteModel)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	return &realRuntime{build: b, model: m}, nil
}

// String names the runtime for the suite's record.
func (r *realRuntime) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := "llama-server " + r.build.Binary + " with " + filepath.Base(r.model.Path)
	if r.unsandboxed != "" {
		s += " (unsandboxed: " + r.unsandboxed + ")"
	}
	return s
}

// llamaServer is one private llama-server started by its launcher. The
// sandbox's init process leads the process group that holds it, so stopping
// or signalling that group reaches all of it.
type llamaServer struct {
	rt   *runtimes.LlamaServer
	http *http.Client
}

// startLlama starts the suite's llama-server: one slot, one thread (on a
// busy host llama.cpp's threads wait at barriers, and two of them on two
// shared cores decoded 30x slower than one), a short context.
func startLlama(ctx context.Context, real *realRuntime, logDir string) (*llamaServer, error) {
	work, err := os.MkdirTemp(logDir, "llama-server-*")
	if err != nil {
		return nil, err
	}
	real.mu.Lock()
	noSandbox := real.unsandboxed != ""
	real.mu.Unlock()
	cfg := runtimes.Config{Model: real.model.Path, ModelName: real.model.Name, ModelSHA256: real.model.SHA256,
		Context: 1024, Threads: 1, WorkDir: work, NoSandbox: noSandbox, ReadyWithin: 60 * time.Second}
	rt, err := real.build.Start(ctx, cfg)
	if errors.Is(err, runtimes.ErrNoSandbox) && !noSandbox {
		real.mu.Lock()
		real.unsandboxed = err.Error()
		real.mu.Unlock()
		cfg.NoSandbox = true
		rt, err = real.build.Start(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("start llama-server: %w", err)
	}
	ls := rt.(*runtimes.LlamaServer)
	return &llamaServer{rt: ls, http: socketClient(ls.Endpoint())}, nil
}

func socketClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		// A fresh connection per call: a reused keep-alive connection is
		// one more thing that can stall between calls.
		DisableKeepAlives: true,
	}}
}

func (s *llamaServer) pid() int { return s.rt.Sandbox().PID() }

func (s *llamaServer) done() <-chan struct{} { return s.rt.Sandbox().Done() }

func (s *llamaServer) target(id string) governor.ProcessTarget {
	return governor.ProcessTarget{TrialID: id, Pid: s.pid(), Done: s.done()}
}

// stream runs one streaming /completion and calls onToken per token. It
// returns when the stream ends, the server dies, or ctx ends.
func (s *llamaServer) stream(ctx context.Context, prompt string, n int, onToken func()) (int, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": n, "stream": true, "cache_prompt": false, "temperature": 0.7, "seed": 1, "ignore_eos": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://llama/completion", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("completion: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	got := 0
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Content string `json:"content"`
			Stop    bool   `json:"stop"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		if ev.Stop {
			return got, nil
		}
		got++
		onToken()
	}
	if err := sc.Err(); err != nil {
		return got, err
	}
	return got, errors.New("completion stream ended without a stop event")
}
