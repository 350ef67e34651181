package governor

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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Installed is what the provisioning step wrote to installed.env.
type Installed struct {
	LlamaServer string
	GGUF        string
}

// DefaultInstalledEnv is where provisioning writes installed.env.
func DefaultInstalledEnv() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "rig", "installed.env")
}

// ErrNotInstalled is returned when installed.env or an entry it needs is
// missing: the real-runtime classes cannot run.
var ErrNotInstalled = errors.New("real runtime not installed")

// ReadInstalled reads LLAMA_SERVER_BIN and SMOLLM2_GGUF from an env file.
func ReadInstalled(path string) (Installed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Installed{}, fmt.Errorf("%w: %v (the provisioning step writes it)", ErrNotInstalled, err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "export "))
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		env[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	in := Installed{LlamaServer: env["LLAMA_SERVER_BIN"], GGUF: env["SMOLLM2_GGUF"]}
	for k, v := range map[string]string{"LLAMA_SERVER_BIN": in.LlamaServer, "SMOLLM2_GGUF": in.GGUF} {
		if v == "" {
			return Installed{}, fmt.Errorf("%w: %s: %s is not set", ErrNotInstalled, path, k)
		}
		if _, err := os.Stat(v); err != nil {
			return Installed{}, fmt.Errorf("%w: %s: %s: %v", ErrNotInstalled, path, k, err)
		}
	}
	return in, nil
}

// llamaServer is one private llama-server on a loopback port, in its own
// process group so ProcessTarget can stop all of it.
type llamaServer struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
	err  error
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startLlama(ctx context.Context, in Installed, logDir string) (*llamaServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.CreateTemp(logDir, "llama-server-*.log")
	if err != nil {
		return nil, err
	}
	// One thread: on a busy host llama.cpp's threads spin at barriers, and
	// two of them on two shared cores decoded 30x slower than one.
	cmd := exec.Command(in.LlamaServer, "-m", in.GGUF, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"-np", "1", "-c", "1024", "-t", "1", "--no-webui")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + logDir}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start llama-server: %w", err)
	}
	s := &llamaServer{cmd: cmd, base: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			b, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("llama-server exited while starting: %v: %s", s.err, tail(b, 400))
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(s.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
	}
	s.kill()
	return nil, fmt.Errorf("llama-server on %s not healthy after 60s", s.base)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

func (s *llamaServer) pid() int { return s.cmd.Process.Pid }

func (s *llamaServer) target(id string) ProcessTarget {
	return ProcessTarget{TrialID: id, Pid: s.pid(), Done: s.done}
}

func (s *llamaServer) kill() {
	_ = syscall.Kill(-s.pid(), syscall.SIGKILL)
	<-s.done
}

// stream runs one streaming /completion and calls onToken per token. It
// returns when the stream ends, the server dies, or ctx ends.
func (s *llamaServer) stream(ctx context.Context, prompt string, n int, onToken func()) (int, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": n, "stream": true, "cache_prompt": false, "temperature": 0.7, "seed": 1, "ignore_eos": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/completion", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// A fresh connection per call: a reused keep-alive connection is one
	// more thing that can stall between calls.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
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
