package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/runtimes"
)

// TestCompareLMEvalOnTwoLlamaServers runs the real lm-eval (PyPI, its
// OpenAI-compatible local-completions model type) on a small local task
// (testdata/lmeval-tiny: 60 questions in a JSON data file, no download) against rig's
// llama-server, started through runtimes, for SmolLM2 Q4_1 and its Q8_0
// requantization, with --log_samples; then `rig compare --from lm-eval`
// pairs the two sample logs, and its exact McNemar p must equal an exact
// binomial test the test computes itself from the same files.
func TestCompareLMEvalOnTwoLlamaServers(t *testing.T) {
	testenv.Long(t, "lm-eval against two real llama-servers")
	lmEval, err := provision.TestTool("LM_EVAL_BIN")
	testenv.NeedsSetup(t, "lm-eval", err)
	in, err := provision.Load()
	testenv.NeedsSetup(t, "llama-server and SmolLM2", err)
	q8, ok := in.OtherQuants["smollm2-135m-instruct"]
	if !ok {
		testenv.NeedsSetup(t, "SmolLM2's Q8_0 requantization", fmt.Errorf("%w: installed.env names no SMOLLM2_REQUANT_Q8_0_GGUF", provision.ErrNotProvisioned))
	}
	taskDir := localTask(t)
	out := t.TempDir()
	models := map[string]provision.Model{"q4_1": in.Models["smollm2-135m-instruct"], "q8_0": q8}
	for _, name := range []string{"q4_1", "q8_0"} {
		runLMEval(t, in, lmEval, taskDir, filepath.Join(out, name), name, models[name])
	}
	fa, fb := samplesFile(t, filepath.Join(out, "q4_1")), samplesFile(t, filepath.Join(out, "q8_0"))

	rig := buildRig(t)
	cmpJSON := filepath.Join(t.TempDir(), "compare.json")
	cmd := exec.Command(rig, "compare", "--from", "lm-eval", filepath.Join(out, "q4_1"), filepath.Join(out, "q8_0"), "--out", cmpJSON)
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rig compare: %v\n%s", err, text)
	}
	for _, want := range []string{"imported evidence", "no receipts", "rig_tiny_arith/exact_match,strip", "exact McNemar"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("rig compare's output lacks %q:\n%s", want, text)
		}
	}
	var c struct {
		Evidence string `json:"evidence"`
		Analysis struct {
			Pairs []struct {
				JobKind string `json:"job_kind"`
				Tasks   int    `json:"tasks"`
				McNemar *struct {
					CandidateOnly int     `json:"candidate_only"`
					BaselineOnly  int     `json:"baseline_only"`
					P             float64 `json:"p"`
				} `json:"mcnemar"`
			} `json:"pairs"`
		} `json:"analysis"`
	}
	raw, err := os.ReadFile(cmpJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Analysis.Pairs) != 1 || c.Analysis.Pairs[0].McNemar == nil || c.Analysis.Pairs[0].Tasks != 60 {
		t.Fatalf("compare.json: %s", raw)
	}
	p := c.Analysis.Pairs[0]
	bOnly, aOnly := discordant(t, fa, fb, "exact_match")
	if p.McNemar.CandidateOnly != bOnly || p.McNemar.BaselineOnly != aOnly {
		t.Errorf("rig counted B only %d, A only %d; the files say %d and %d", p.McNemar.CandidateOnly, p.McNemar.BaselineOnly, bOnly, aOnly)
	}
	if want := binomialTwoSided(bOnly, aOnly); math.Abs(p.McNemar.P-want) > 1e-12 {
		t.Errorf("McNemar p %g, exact binomial %g (B only %d, A only %d)", p.McNemar.P, want, bOnly, aOnly)
	}
	t.Logf("rig compare --from lm-eval:\n%s", text)
}

// localTask copies testdata/lmeval-tiny with the data file's path made
// absolute, as lm-eval's --include_path reads it.
func localTask(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src, err := filepath.Abs(filepath.Join("testdata", "lmeval-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile(filepath.Join(src, "rig_tiny_arith.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.Replace(string(yaml), "test: arith.jsonl", "test: "+filepath.Join(src, "arith.jsonl"), 1)
	if err := os.WriteFile(filepath.Join(dir, "rig_tiny_arith.yaml"), []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runLMEval starts llama-server on the model through runtimes (its
// loopback-only sandbox, reached through a unix socket), forwards a
// loopback TCP port to it for lm-eval, and runs lm-eval on the local task.
func runLMEval(t *testing.T, in provision.Installed, lmEval, taskDir, outDir, name string, m provision.Model) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := runtimes.BuildOf(in, "llama-server")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := b.Start(ctx, runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatalf("starting llama-server on %s: %v", m.Path, err)
	}
	defer rt.Stop(context.Background())
	addr := forwardLoopback(t, rt.Endpoint())
	cmd := exec.CommandContext(ctx, lmEval, "--model", "local-completions",
		"--model_args", fmt.Sprintf("model=%s,base_url=http://%s/v1/completions,tokenizer_backend=None,tokenized_requests=False,num_concurrent=1,max_retries=1,seed=42", name, addr),
		"--tasks", "rig_tiny_arith", "--include_path", taskDir, "--output_path", outDir, "--log_samples", "--seed", "42")
	// No download and no telemetry: the task's data is a local file and
	// every hub client is told it is offline.
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "HF_DATASETS_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "HF_HUB_DISABLE_TELEMETRY=1", "DO_NOT_TRACK=1",
		"HF_HOME="+filepath.Join(outDir, ".hf"), "HF_DATASETS_CACHE="+filepath.Join(outDir, ".hf", "datasets"))
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lm_eval on %s: %v\n%s", name, err, tailOf(string(log), 4000))
	}
}

// forwardLoopback serves a loopback TCP port that forwards each connection
// to the runtime's unix socket, for a client (lm-eval) that speaks HTTP
// over TCP only.
func forwardLoopback(t *testing.T, socket string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String()
}

func samplesFile(t *testing.T, dir string) string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "samples_rig_tiny_arith_") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("lm-eval wrote %d samples files under %s, want 1", len(found), dir)
	}
	return found[0]
}

// discordant counts, straight from the two samples files, the items only
// B passes and only A passes on the metric.
func discordant(t *testing.T, a, b, metric string) (bOnly, aOnly int) {
	t.Helper()
	read := func(path string) map[float64]float64 {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out := map[float64]float64{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out[line["doc_id"].(float64)] = line[metric].(float64)
		}
		return out
	}
	va, vb := read(a), read(b)
	if len(va) != 60 || len(vb) != 60 {
		t.Fatalf("samples: %d and %d items, want 60 each", len(va), len(vb))
	}
	for id, x := range va {
		switch y := vb[id]; {
		case y == 1 && x == 0:
			bOnly++
		case x == 1 && y == 0:
			aOnly++
		}
	}
	return bOnly, aOnly
}

// binomialTwoSided is the exact two-sided binomial test of min(b, c) of
// b+c at one half, in exact rational arithmetic.
func binomialTwoSided(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	tail := new(big.Rat)
	for i := 0; i <= min(b, c); i++ {
		tail.Add(tail, new(big.Rat).SetFrac(new(big.Int).Binomial(int64(n), int64(i)), new(big.Int).Lsh(big.NewInt(1), uint(n))))
	}
	p, _ := tail.Mul(tail, big.NewRat(2, 1)).Float64()
	return math.Min(1, p)
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
