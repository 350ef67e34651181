package main

import (
	"github.com/spf13/cobra"

	"rig/bench/speed"
	"rig/internal/provision"
)

func newBenchRuntimesCommand() *cobra.Command {
	var req speed.Request
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runtimes",
		Short: "Measure the runtimes side by side on the same GGUF: pp512, tg128, TTFT, TPOT, peak memory",
		Long: `runtimes starts every provisioned server runtime (llama-server and Ollama) on
the same GGUF with the same threads, context and greedy sampling, and measures
as llama-bench does: prompt tokens/s reading a 512-token prompt and generation
tokens/s making 128 tokens (mean ± sd over the repetitions), time to first
token and time per output token (p50, p99), and the peak memory of each
runtime's process tree. The repetitions are interleaved across runtimes, so a
machine whose load drifts slows them alike. The runtimes' own timing fields
are the source (llama-server's timings; Ollama's prompt_eval_duration and
eval_duration), each call checked against its wall time. It prints the
machine line, each build's pins and the CPU backend each loaded.

Goal: Ollama at least 0.75× llama-server's generation and 0.6× its prompt
tokens/s, for every model and thread count.

Where a generation goal is missed at a thread count that takes every core,
the bench says why: it runs the model again at one thread fewer, once with
the freed core idle and once with it kept busy. A runtime whose time per
token rises with the spare core taken (beyond llama-server's rise) needs
that core for work outside its compute threads (sampling, detokenizing,
streaming), not faster kernels. --probe runs it where the goal is met too.

  rig bench runtimes
  rig bench runtimes --model gemma-3-270m --threads 1 --reps 5 --json

Exit status 1 when a goal is missed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := provision.Load()
			if err != nil {
				return err
			}
			req.Installed = in
			res, err := speed.Run(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printBench(cmd.OutOrStdout(), "bench runtimes", res, res.Pass, asJSON)
		},
	}
	cmd.Flags().StringSliceVar(&req.Models, "model", nil, "models to measure, by registry name (default: both bundled models)")
	cmd.Flags().StringSliceVar(&req.Runtimes, "runtime", nil, "runtimes to compare, llama-server among them (default: every provisioned one)")
	cmd.Flags().IntSliceVar(&req.Threads, "threads", []int{1, 2}, "thread counts to measure at")
	cmd.Flags().IntVar(&req.Reps, "reps", 3, "repetitions of each call")
	cmd.Flags().IntVar(&req.PromptTokens, "prompt-tokens", 512, "prompt size of the pp call, in tokens")
	cmd.Flags().IntVar(&req.GenTokens, "gen-tokens", 128, "tokens made by the tg call")
	cmd.Flags().IntVar(&req.Context, "context", 2048, "context every runtime is started with")
	cmd.Flags().StringVar(&req.WorkDir, "work-dir", "", "keep the runtimes' logs here (default: a temporary directory, removed after)")
	cmd.Flags().BoolVar(&req.NoSandbox, "no-sandbox", false, "run without network namespaces")
	cmd.Flags().BoolVar(&req.Probe, "probe", false, "at a thread count that takes every core, probe where each runtime's generation gap comes from even where the goal is met (it is probed wherever a goal is missed)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
