package runtimes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/internal/provision"
)

// These tests start the real runtimes with the real models that make setup
// provisions. -short skips them; a missing provision fails them, because
// make test provisions first.
func provisioned(t testing.TB) provision.Installed {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts real runtimes with real models (run without -short)")
	}
	in, err := provision.Load()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return in
}

func startReal(t testing.TB, kind, model string, mutate ...func(*Config)) Runtime {
	t.Helper()
	in := provisioned(t)
	m := in.Models[model]
	cfg := Config{Model: m.Path, ModelName: model, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir()}
	for _, f := range mutate {
		f(&cfg)
	}
	rt, err := Launch(context.Background(), in, kind, cfg)
	if err != nil {
		t.Fatalf("starting %s with %s: %v", kind, model, err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()) })
	return rt
}

var kinds = []string{"llama-server", "ollama"}

func TestSeededGenerationReproducesTokensAndLogprobs(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			rt := startReal(t, kind, "smollm2-135m-instruct")
			req := Request{CallID: "repro", Messages: []Message{{Role: "user", Content: "Write one sentence about rivers."}},
				Sampling: Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 1234}, MaxTokens: 24, TopK: 5}
			a, err := rt.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := rt.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Steps) == 0 || len(a.Steps) != len(b.Steps) {
				t.Fatalf("step counts %d and %d", len(a.Steps), len(b.Steps))
			}
			if a.Text != b.Text {
				t.Fatalf("texts differ:\n%q\n%q", a.Text, b.Text)
			}
			for i := range a.Steps {
				if a.Steps[i].Text != b.Steps[i].Text || a.Steps[i].Logprob != b.Steps[i].Logprob {
					t.Fatalf("step %d differs: %+v vs %+v", i, a.Steps[i].Candidate, b.Steps[i].Candidate)
				}
				if len(a.Steps[i].Top) != 5 {
					t.Fatalf("step %d has %d top entries, want K=5", i, len(a.Steps[i].Top))
				}
				for j := range a.Steps[i].Top {
					if a.Steps[i].Top[j].Logprob != b.Steps[i].Top[j].Logprob {
						t.Fatalf("step %d top %d differs", i, j)
					}
				}
			}
			if a.OutputTokens != len(a.Steps)+a.LogprobsMissing {
				t.Errorf("output tokens %d != steps %d + missing %d", a.OutputTokens, len(a.Steps), a.LogprobsMissing)
			}
			if a.RenderedPrompt == "" || !strings.Contains(a.RenderedPrompt, "rivers") {
				t.Errorf("rendered prompt not recorded: %q", a.RenderedPrompt)
			}
			if a.PeakMemory <= 0 {
				t.Errorf("no peak memory measured")
			}
			if kind == "llama-server" && (len(a.PromptTokenIDs) == 0 || a.Steps[0].ID < 0) {
				t.Errorf("llama-server gave no token ids")
			}
			if o, ok := rt.(*Ollama); ok {
				// The start-up load carries the pinned runner options, so the
				// calls reuse it instead of loading the model a second time.
				log, err := os.ReadFile(filepath.Join(o.cfg.WorkDir, "ollama.log"))
				if err != nil {
					t.Fatal(err)
				}
				if n := strings.Count(string(log), `msg="loading model"`); n != 1 {
					t.Errorf("Ollama loaded the model %d times for a start and two calls, want once", n)
				}
			}
		})
	}
}

func TestRuntimeSeesLoopbackOnlyAndNoCredentials(t *testing.T) {
	t.Setenv("STUDIO_API_KEY", "sk-test-must-not-leak")
	t.Setenv("OLLAMA_ORIGINS", "*")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			rt := startReal(t, kind, "smollm2-135m-instruct")
			seesLoopbackOnlyAndNoCredentials(t, rt, "STUDIO_API_KEY", "sk-test-must-not-leak", "OLLAMA_ORIGINS")
		})
	}
}

// seesLoopbackOnlyAndNoCredentials reads a running runtime's containment
// from outside, as the kernel sees its namespace (not as rig's pins say):
// only the loopback interface, no route outside the local table, none of
// leaks in any of its processes' environments, and its libraries recorded.
func seesLoopbackOnlyAndNoCredentials(t *testing.T, rt interface {
	Sandbox() *Sandbox
	Pins() Pins
}, leaks ...string) {
	t.Helper()
	pid := rt.Sandbox().RuntimePID
	dev, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(dev), "\n")[2:] {
		name, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && name != "lo" {
			t.Errorf("runtime sees interface %q", name)
		}
	}
	route, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/route", pid))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(route)), "\n"); len(lines) > 1 {
		t.Errorf("runtime has IPv4 routes outside the local table:\n%s", route)
	}
	if !rt.Pins().Containment.LoopbackOnly {
		t.Errorf("containment: %+v", rt.Pins().Containment)
	}
	for _, p := range ProcessTree(pid) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if err != nil {
			continue
		}
		for _, leak := range leaks {
			if strings.Contains(string(env), leak) {
				t.Errorf("pid %d environment holds %s", p, leak)
			}
		}
	}
	if len(rt.Pins().Libraries) == 0 {
		t.Errorf("no loaded libraries recorded")
	}
}

func TestRuntimeCrashMidCallIsATypedError(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			rt := startReal(t, kind, "smollm2-135m-instruct")
			pid := rt.Sandbox().RuntimePID
			// Kill the runtime once it is visibly computing the call: its CPU
			// time has moved since the call began.
			base := TreeCPUTicks(pid)
			go func() {
				for TreeCPUTicks(pid) < base+3 {
					time.Sleep(5 * time.Millisecond)
				}
				for _, p := range ProcessTree(pid) {
					syscall.Kill(p, syscall.SIGKILL)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := rt.Generate(ctx, Request{CallID: "crash", Messages: []Message{{Role: "user", Content: "Repeat the word apple five hundred times, separated by commas."}},
				MaxTokens: 900, TopK: 5}) // prompt and stop cap inside the 1024-token context, or the call is refused before it starts
			if !errors.Is(err, ErrCrashed) {
				t.Fatalf("want ErrCrashed, got %v", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the crash was noticed only by the timeout")
			}
		})
	}
}

func TestBadInputsGiveClearErrorsAndLeaveNothingRunning(t *testing.T) {
	in := provisioned(t)
	m := in.Models["smollm2-135m-instruct"]
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "notes.gguf")
	os.WriteFile(notGGUF, []byte("this is not a model"), 0o600)
	truncated := filepath.Join(dir, "truncated.gguf")
	src, err := os.ReadFile(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(truncated, src[:1<<20], 0o600)
	absent := in
	absent.LlamaServer = filepath.Join(dir, "llama-server")
	cases := []struct {
		name string
		in   provision.Installed
		kind string
		cfg  Config
		want error
	}{
		{"missing model", in, "llama-server", Config{Model: filepath.Join(dir, "absent.gguf")}, ErrModelFile},
		{"not a gguf", in, "ollama", Config{Model: notGGUF}, ErrModelFile},
		{"wrong sha256", in, "llama-server", Config{Model: m.Path, ModelSHA256: strings.Repeat("0", 64)}, ErrChecksum},
		{"absent binary", absent, "llama-server", Config{Model: m.Path}, ErrBinaryMissing},
		{"truncated gguf", in, "llama-server", Config{Model: truncated, ReadyWithin: time.Minute}, ErrModelFile},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.WorkDir = filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			rt, err := Launch(context.Background(), c.in, c.kind, c.cfg)
			if err == nil {
				rt.Stop(context.Background())
				t.Fatal("started anyway")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("want %v, got %v", c.want, err)
			}
			if !strings.Contains(err.Error(), filepath.Base(c.cfg.Model)) && !strings.Contains(err.Error(), c.in.LlamaServer) {
				t.Errorf("error does not name the file: %v", err)
			}
			if leftover := processesUnder(c.cfg.WorkDir); len(leftover) > 0 {
				t.Errorf("left running: %v", leftover)
			}
		})
	}
}

// processesUnder lists processes whose command line mentions dir.
func processesUnder(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(b), dir) {
			out = append(out, pid)
		}
	}
	return out
}
