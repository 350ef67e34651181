package main

import (
	"github.com/spf13/cobra"

	"rig/bench/speed"
	"rig/internal/provision"
)

func newBenchSlotsCommand() *cobra.Command {
	var req speed.SlotsRequest
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "slots",
		Short: "Measure a study's batch at 1, 2, 4 and 8 slots against llama.cpp's own batched throughput",
		Long: `slots starts one arm of the quick study (SmolLM2-135M Q4_1 on llama-server,
context 2048 per slot, its sampling and stop cap of 96) with N slots, for N in
1, 2, 4 and 8, and sends N requests at once through the call a trial makes
(prompt as token ids, top-5 log-probabilities, the arm's sampling), each a
counting prompt that runs to the stop cap. Interleaved with each batch it runs
llama.cpp's llama-batched-bench (built by make setup from the pinned source)
on the same model, threads, prompt length (-npp), generation length (-ntg)
and sequence count (-npl N). It prints per slot count rig's tokens/s over the
batch, the bench's generation (S_TG) and overall (S) tokens/s, rig's ratio
to S and each one's speed-up over one slot.

Goal: rig at least 0.8× llama-batched-bench's throughput at every slot count.

With --runtime ollama the same batches go to Ollama with OLLAMA_NUM_PARALLEL=N;
Ollama has no batched bench of its own, so only its speed-up over one slot
is printed.

Example:

  rig bench slots
  rig bench slots --slots 1,4 --reps 3 --threads 2 --json
  rig bench slots --runtime llama-server,ollama
  rig bench slots --device cuda --model-file synth.gguf --slots 1,2,4,8,16,32   # on a card (scripts/gpu-check.sh)

Exit status 1 when the goal is missed at a slot count.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := req.Check(); err != nil {
				return err
			}
			in, err := provision.Load()
			if err != nil {
				return err
			}
			req.Installed = in
			res, err := speed.RunSlots(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printBench(cmd.OutOrStdout(), "bench slots", res, res.Pass, asJSON)
		},
	}
	cmd.Flags().StringSliceVar(&req.Runtimes, "runtime", []string{"llama-server"}, "runtimes to measure (llama-server against llama-batched-bench; ollama for its scaling only)")
	cmd.Flags().StringVar(&req.Model, "model", "smollm2-135m-instruct", "model, by registry name (default: the quick study's incumbent)")
	cmd.Flags().IntSliceVar(&req.Slots, "slots", []int{1, 2, 4, 8}, "slot counts, each also the batch size")
	cmd.Flags().IntVar(&req.Threads, "threads", 0, "threads of the runtime and the bench (default: the runtime's, as a study starts it)")
	cmd.Flags().IntVar(&req.Context, "context", 2048, "pinned context of one request (each slot gets all of it)")
	cmd.Flags().IntVar(&req.PromptTokens, "prompt-tokens", 128, "prompt of each request, in tokens")
	cmd.Flags().IntVar(&req.GenTokens, "gen-tokens", 96, "tokens each request generates (the stop cap)")
	cmd.Flags().IntVar(&req.Reps, "reps", 2, "repetitions at each slot count")
	cmd.Flags().StringVar(&req.WorkDir, "work-dir", "", "keep the runtimes' logs here (default: a temporary directory, removed after)")
	cmd.Flags().BoolVar(&req.NoSandbox, "no-sandbox", false, "run without network namespaces")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().StringVar(&req.ModelFile, "model-file", "", "run this GGUF instead of --model (a card's machine has no registry models: scripts/gpu-check.sh makes one)")
	cmd.Flags().StringVar(&req.Device, "device", "cpu", "cpu, or cuda: the CUDA llama-server with every layer on the card, against the CUDA build's llama-batched-bench -ngl 99")
	return cmd
}
