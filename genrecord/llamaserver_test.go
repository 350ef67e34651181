package genrecord

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests in this file run only where the lead has provisioned a real
// llama-server and SmolLM2 (LLAMA_SERVER_BIN, SMOLLM2_GGUF in the
// environment or in ~/.cache/rig/installed.env). They check ForcedGrammar
// and the comparison rule against the real runtime, on loopback only.

func provisioned(t *testing.T, names ...string) []string {
	t.Helper()
	env := map[string]string{}
	if home, err := os.UserHomeDir(); err == nil {
		if f, err := os.Open(filepath.Join(home, ".cache", "rig", "installed.env")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
				if ok {
					env[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
				}
			}
			f.Close()
		}
	}
	var out []string
	for _, n := range names {
		v := os.Getenv(n)
		if v == "" {
			v = env[n]
		}
		if v == "" {
			t.Skipf("%s not provisioned (set it or list it in ~/.cache/rig/installed.env)", n)
		}
		if _, err := os.Stat(v); err != nil {
			t.Skipf("%s=%s: %v", n, v, err)
		}
		out = append(out, v)
	}
	return out
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// liveServer is one private llama-server on a loopback port.
type liveServer struct {
	url  string
	pins Pins
}

func startLlamaServer(t *testing.T, bin, model string) *liveServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(t.TempDir(), "llama-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-m", model, "--host", "127.0.0.1", "--port", fmt.Sprint(port),
		"-np", "1", "-c", "2048", "-t", "2", "--no-webui", "--no-warmup")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "LD_LIBRARY_PATH=" + filepath.Dir(bin)}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	s := &liveServer{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(s.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("llama-server not healthy after 3 minutes:\n%s", log)
		}
		time.Sleep(250 * time.Millisecond)
	}
	libs := map[string]string{}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.Contains(filepath.Base(f[5]), ".so") {
			if _, done := libs[f[5]]; !done {
				libs[f[5]] = fileSHA256(t, f[5])
			}
		}
	}
	s.pins = Pins{
		ModelSHA256: fileSHA256(t, model), ModelName: filepath.Base(model),
		Runtime: "llama-server", RuntimeVersion: "test", BinarySHA256: fileSHA256(t, bin),
		Libraries: libs, BuildFlags: "unknown (test)", MachineLine: "genrecord integration test", DesignHash: "test",
	}
	return s
}

type llamaProb struct {
	ID      int     `json:"id"`
	Token   string  `json:"token"`
	Bytes   Bytes   `json:"bytes"`
	Logprob float64 `json:"logprob"`
	Top     []struct {
		ID      int     `json:"id"`
		Token   string  `json:"token"`
		Bytes   Bytes   `json:"bytes"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

type llamaCompletion struct {
	TokensPredicted int         `json:"tokens_predicted"`
	StopType        string      `json:"stop_type"`
	Probs           []llamaProb `json:"completion_probabilities"`
}

func (s *liveServer) post(ctx context.Context, path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, data)
	}
	return json.Unmarshal(data, out)
}

func toSteps(probs []llamaProb) []Step {
	steps := make([]Step, len(probs))
	for i, p := range probs {
		top := make([]Alt, len(p.Top))
		for j, a := range p.Top {
			top[j] = Alt{ID: intp(a.ID), Text: a.Token, Bytes: a.Bytes, Logprob: a.Logprob}
		}
		steps[i] = Step{ID: intp(p.ID), Text: p.Token, Bytes: p.Bytes, Logprob: f64p(p.Logprob), Top: top}
	}
	return steps
}

// llamaRescorer is the forced-token replay the issue describes, kept here
// as the reference the llama-server driver's Rescorer can follow.
type llamaRescorer struct{ s *liveServer }

func (r llamaRescorer) Stack(context.Context) (Pins, error) { return r.s.pins, nil }

func (r llamaRescorer) Rescore(ctx context.Context, row Row) ([]Step, error) {
	ids, _, err := ForcedTokens(row)
	if err != nil {
		return nil, err
	}
	var c llamaCompletion
	err = r.s.post(ctx, "/completion", map[string]any{
		"prompt": row.PromptTokenIDs, "grammar": ForcedGrammar(ids), "n_predict": len(row.Output),
		"n_probs": row.K, "post_sampling_probs": false, "cache_prompt": false,
		"temperature": row.Sampling.Temperature, "top_k": row.Sampling.TopK, "top_p": row.Sampling.TopP,
		"min_p": row.Sampling.MinP, "seed": row.Sampling.Seed,
	}, &c)
	if err != nil {
		return nil, err
	}
	return toSteps(c.Probs), nil
}

// liveRows generates kept calls on s: one greedy, two sampled.
func liveRows(t *testing.T, s *liveServer) []Row {
	t.Helper()
	ctx := context.Background()
	var rows []Row
	for i, tc := range []struct {
		question string
		temp     float64
	}{
		{"Name three prime numbers.", 0},
		{"Write one sentence about rivers.", 0.8},
		{"What is a linked list?", 0.8},
	} {
		prompt := "<|im_start|>user\n" + tc.question + "<|im_end|>\n<|im_start|>assistant\n"
		var tok struct {
			Tokens []int `json:"tokens"`
		}
		if err := s.post(ctx, "/tokenize", map[string]any{"content": prompt, "add_special": true, "parse_special": true}, &tok); err != nil {
			t.Fatal(err)
		}
		sampling := Sampling{Temperature: tc.temp, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: int64(100 + i)}
		t0 := time.Now()
		var c llamaCompletion
		if err := s.post(ctx, "/completion", map[string]any{
			"prompt": tok.Tokens, "n_predict": 32, "n_probs": DefaultK, "cache_prompt": false,
			"temperature": sampling.Temperature, "top_k": sampling.TopK, "top_p": sampling.TopP, "min_p": sampling.MinP, "seed": sampling.Seed,
		}, &c); err != nil {
			t.Fatal(err)
		}
		stop := StopEOS
		if c.StopType == "limit" {
			stop = StopLength
		}
		rows = append(rows, Row{RowID: fmt.Sprintf("live-%d", i), Arm: "smollm2", Prompt: fmt.Sprintf("q%d", i), Role: RoleCandidate,
			RenderedPrompt: prompt, PromptTokenIDs: tok.Tokens, Output: toSteps(c.Probs), K: DefaultK, Sampling: sampling,
			StopReason: stop, RuntimeTokenCount: c.TokensPredicted, WallMS: ms(time.Since(t0))})
	}
	return rows
}

func TestLlamaServerForcedReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real llama-server")
	}
	paths := provisioned(t, "LLAMA_SERVER_BIN", "SMOLLM2_GGUF")
	s := startLlamaServer(t, paths[0], paths[1])
	ctx := context.Background()
	rows := liveRows(t, s)
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	w, err := OpenWriter(path, s.pins)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Append(r); err != nil {
			t.Fatalf("a real llama-server row fails the record's checks: %v", err)
		}
	}
	w.Close()

	sum, err := Replay(ctx, path, llamaRescorer{s}, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	sum.WriteText(&text)
	t.Log("\n" + text.String())
	if sum.Status != StatusReproduced || sum.MaxAbsDiff != 0 {
		t.Fatalf("genuine rows on the same stack: status %s, max |Δ| %g; want exact reproduction", sum.Status, sum.MaxAbsDiff)
	}

	// One-token edit: replace step 3 with its runner-up, keeping the
	// recorded log-probs, as a forger editing the kept text would.
	edited := rows[0]
	edited.RowID = "live-edited"
	edited.Output = append([]Step(nil), rows[0].Output...)
	alt := edited.Output[3].Top[1]
	edited.Output[3].ID, edited.Output[3].Text, edited.Output[3].Bytes = alt.ID, alt.Text, alt.Bytes
	steps, err := llamaRescorer{s}.Rescore(ctx, edited)
	if err != nil {
		t.Fatal(err)
	}
	c := Compare(edited.Output, steps, Tolerance{})
	if c.Reproduced || c.First == nil || c.First.Step != 3 {
		t.Fatalf("one-token edit at step 3 not caught there: %+v", c.First)
	}
	t.Logf("edit caught: %s; max |Δ| after the edit %.3g nats", c.First, c.MaxAbsDiff)
}

// TestLlamaServerSwappedModel re-scores SmolLM2's rows on a Gemma server
// that claims SmolLM2's pins: the pins check is bypassed on purpose, so only
// the log-probs can catch the swap.
func TestLlamaServerSwappedModel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two real llama-servers")
	}
	paths := provisioned(t, "LLAMA_SERVER_BIN", "SMOLLM2_GGUF", "GEMMA3_GGUF")
	smol := startLlamaServer(t, paths[0], paths[1])
	rows := liveRows(t, smol)
	gemma := startLlamaServer(t, paths[0], paths[2])
	gemma.pins = smol.pins // a stack that lies about its model
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	w, err := OpenWriter(path, smol.pins)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	sum, err := Replay(context.Background(), path, llamaRescorer{gemma}, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	sum.WriteText(&text)
	t.Log("\n" + text.String())
	// A token id that the other vocabulary cannot emit through a grammar
	// (an unused or control token) makes llama-server refuse the request:
	// that row is an error, not a reproduction, and never a pass.
	if sum.Reproduced != 0 || sum.Mismatched == 0 || sum.Status != StatusMismatch {
		t.Fatalf("swapped model: %d reproduced, %d mismatched, %d errors of %d rows; want none reproduced", sum.Reproduced, sum.Mismatched, sum.Errors, len(rows))
	}
}
