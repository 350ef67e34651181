package main

import (
	"fmt"
	"os"
	"path/filepath"
	"rig/internal/offload"
	"rig/internal/provision"
	"rig/runtimes"

	"github.com/spf13/cobra"
)

func newRuntimesSmokeCommand() *cobra.Command {
	var noSandbox, compare bool
	var maxTokens int
	var prompt, backend, modelFile string
	cmd := &cobra.Command{
		Use:   "smoke",
		Short: "Run one short generation on each runtime x model inside the sandbox",
		Long: `smoke starts a private llama-server and a private ollama serve for each bundled
model, each in its own loopback-only network namespace, sends one short seeded
greedy generation, and prints the tokens, the top-5 log-probabilities of the
first steps, the runtime's timings, the peak memory of its process tree and what
the containment check read. Everything it starts is stopped before it returns.

--backend cuda runs llama-server's CUDA build with every layer on the card
(held to that pin: a partial offload fails) instead; --model FILE smokes that
GGUF instead of the bundled models; --compare-backends runs the same seeded
greedy generation on the CPU and the CUDA build and prints how far their
log-probabilities are apart, step by step.

  rig runtimes smoke --backend cuda --model /tmp/synth-1b.gguf --compare-backends`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A bad flag is refused first, on a machine with no setup too.
			if backend != offload.BackendCPU && backend != offload.BackendCUDA {
				return fmt.Errorf("--backend %q: use cpu or cuda", backend)
			}
			in, err := provision.Load()
			if err != nil {
				return err
			}
			if compare || backend == offload.BackendCUDA || modelFile != "" {
				return smokeBackends(cmd, in, backend, modelFile, prompt, maxTokens, noSandbox, compare)
			}
			work, err := os.MkdirTemp("", "rig-smoke-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			for _, kind := range []string{"llama-server", "ollama"} {
				build, err := runtimes.BuildOf(in, kind)
				if err != nil {
					return err
				}
				for _, name := range []string{"smollm2-135m-instruct", "gemma-3-270m"} {
					m := in.Models[name]
					cfg := runtimes.Config{Model: m.Path, ModelName: name, ModelSHA256: m.SHA256,
						Context: 2048, WorkDir: filepath.Join(work, kind+"-"+name), NoSandbox: noSandbox}
					if _, err := smokeOne(cmd, build, cfg, kind+" × "+name, "smoke-"+kind+"-"+name, prompt, maxTokens); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run without network namespaces (recorded on every receipt)")
	cmd.Flags().IntVar(&maxTokens, "max-tokens", 12, "stop cap for the smoke generation")
	cmd.Flags().StringVar(&prompt, "prompt", "Name three colours.", "the user message sent to every model")
	cmd.Flags().StringVar(&backend, "backend", offload.BackendCPU, "cpu, or cuda for llama-server's CUDA build with every layer on the card")
	cmd.Flags().StringVar(&modelFile, "model", "", "smoke this GGUF on llama-server instead of the bundled models")
	cmd.Flags().BoolVar(&compare, "compare-backends", false, "run the generation on the CPU and the CUDA build and compare their log-probabilities")
	return cmd
}
