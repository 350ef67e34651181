package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rig/governor"
	"rig/internal/gguf"
	"rig/internal/offload"
	"rig/internal/provision"
	"rig/preflight"
	"rig/runtimes"
)

// synthShapes are realistic model shapes for synth-model: the layer count,
// width, heads and feed-forward of well-known open models, so that a card's
// memory and kernels see what a real model of that size asks of them.
var synthShapes = map[string]gguf.TinyOptions{
	"tiny": {},
	"135m": {Layers: 30, Embd: 576, Heads: 9, KVHeads: 3, FF: 1536, Context: 8192},
	"1b":   {Layers: 22, Embd: 2048, Heads: 32, KVHeads: 4, FF: 5632, Context: 32768},
	"3b":   {Layers: 28, Embd: 3072, Heads: 24, KVHeads: 8, FF: 8192, Context: 32768},
}

func newRuntimesSynthModelCommand() *cobra.Command {
	var shape, out string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "synth-model --shape 1b --out FILE",
		Short: "Write a random-weight llama GGUF at a realistic shape with rig's own GGUF writer",
		Long: `synth-model writes a llama-architecture GGUF whose weights are random (seeded)
at the shape of a real model: 135m (SmolLM2-135M's layers and widths), 1b
(TinyLlama-1.1B's) or 3b (Llama-3.2-3B's), or tiny. Its vocabulary is rig's small
byte-level one, so its output is noise; what it is for is a card's memory and
kernels seeing what a model of that size asks, where no model file can travel
(scripts/gpu-check.sh makes its models this way on the card's machine, and its
report says so). Attention and embeddings are F16, feed-forward Q8_0.

  rig runtimes synth-model --shape 1b --out /tmp/synth-1b.gguf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, ok := synthShapes[shape]
			if !ok {
				return fmt.Errorf("--shape %q: use one of tiny, 135m, 1b, 3b", shape)
			}
			if out == "" {
				return fmt.Errorf("--out: give the file to write, e.g. --out /tmp/synth-%s.gguf", shape)
			}
			o.Seed = seed
			o.ChatTemplate = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
			started := time.Now()
			if err := gguf.WriteTiny(out, o); err != nil {
				return err
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			sum, err := runtimes.FileSHA256(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: shape %s, %s, sha256 %s, in %s (random weights: output is noise)\n",
				out, shape, preflight.Size(st.Size()), sum, time.Since(started).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&shape, "shape", "135m", "tiny, 135m, 1b or 3b")
	cmd.Flags().StringVar(&out, "out", "", "the GGUF file to write")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "weights seed (another seed is another model)")
	return cmd
}

// smokeBackends is smoke on llama-server for one backend or both, on the
// bundled models or one GGUF.
func smokeBackends(cmd *cobra.Command, in provision.Installed, backend, modelFile, prompt string, maxTokens int, noSandbox, compare bool) error {
	var models []provision.Model
	if modelFile != "" {
		sum, err := runtimes.FileSHA256(modelFile)
		if err != nil {
			return fmt.Errorf("--model: %w", err)
		}
		models = []provision.Model{{Name: strings.TrimSuffix(filepath.Base(modelFile), ".gguf"), Path: modelFile, SHA256: sum}}
	} else {
		for _, name := range []string{"smollm2-135m-instruct", "gemma-3-270m"} {
			models = append(models, in.Models[name])
		}
	}
	backends := []string{backend}
	if compare {
		backends = []string{offload.BackendCPU, offload.BackendCUDA}
	}
	work, err := os.MkdirTemp("", "rig-smoke-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	out := cmd.OutOrStdout()
	for _, m := range models {
		results := map[string]runtimes.Result{}
		for _, be := range backends {
			build, err := runtimes.BuildOf(in, offload.Component("llama-server", be))
			if err != nil {
				return err
			}
			cfg := runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 2048,
				WorkDir: filepath.Join(work, be+"-"+m.Name), NoSandbox: noSandbox}
			if be == offload.BackendCUDA {
				cfg.Offload = offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}
			}
			res, err := smokeOne(cmd, build, cfg, fmt.Sprintf("llama-server (%s) × %s", be, m.Name), "smoke-"+be+"-"+m.Name, prompt, maxTokens)
			if err != nil {
				return err
			}
			results[be] = res
		}
		if compare {
			printBackendDiff(out, m.Name, results[offload.BackendCPU], results[offload.BackendCUDA])
		}
	}
	return nil
}

// smokeOne is one smoke generation: start the build, one seeded greedy
// call, stop, print. On the card it also reads the energy counter around
// the call (the model is loaded by then) and prints the load report.
func smokeOne(cmd *cobra.Command, build runtimes.Build, cfg runtimes.Config, title, callID, prompt string, maxTokens int) (runtimes.Result, error) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "== %s\n", title)
	started := time.Now()
	rt, err := build.Start(cmd.Context(), cfg)
	if err != nil {
		return runtimes.Result{}, err
	}
	var nv *governor.NVML
	var e0 float64
	var counted bool
	if cfg.Offload.OnCard() {
		if nv, err = governor.OpenNVML(cmd.Context(), 0); err == nil {
			e0, counted = nv.EnergyJoules()
			defer nv.Close()
		}
	}
	res, err := rt.Generate(cmd.Context(), runtimes.Request{
		CallID: callID, Messages: []runtimes.Message{{Role: "user", Content: prompt}},
		Sampling: runtimes.Sampling{Temperature: 0, Seed: 42}, MaxTokens: maxTokens, TopK: 5,
	})
	energy := ""
	if nv != nil {
		if e1, ok := nv.EnergyJoules(); ok && counted && res.OutputTokens > 0 {
			energy = fmt.Sprintf("%.3f J over %d output tokens = %.4f J/token (the card's NVML energy counter, load excluded)", e1-e0, res.OutputTokens, (e1-e0)/float64(res.OutputTokens))
		} else {
			energy = "the card has no energy counter (NVML): not measured"
		}
	}
	pins := rt.Pins()
	_ = rt.Stop(cmd.Context())
	if err != nil {
		return res, err
	}
	printSmoke(out, pins, res, time.Since(started))
	if energy != "" {
		fmt.Fprintf(out, "   energy    %s\n", energy)
	}
	if pins.Load != nil {
		fmt.Fprintf(out, "   load report: %s\n", pins.Load)
	}
	return res, nil
}

// printBackendDiff compares two backends' seeded greedy generations step by
// step: the chosen token and its log-probability.
func printBackendDiff(w io.Writer, model string, cpu, cuda runtimes.Result) {
	n := min(len(cpu.Steps), len(cuda.Steps))
	same, worst := 0, 0.0
	for i := 0; i < n; i++ {
		a, b := cpu.Steps[i], cuda.Steps[i]
		if a.ID != b.ID {
			break
		}
		same++
		worst = max(worst, math.Abs(a.Logprob-b.Logprob))
	}
	fmt.Fprintf(w, "== cpu vs cuda × %s: %d of %d steps chose the same token; largest |Δ logprob| over them %.4g nats\n", model, same, max(len(cpu.Steps), len(cuda.Steps)), worst)
}
