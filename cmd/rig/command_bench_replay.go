package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"rig/bench/replaycost"
)

func newBenchReplayCommand() *cobra.Command {
	req := replaycost.ReplayBenchRequest{Model: "smollm2-135m-instruct"}
	var runtime string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Measure what replaying a row costs against the generation it re-scores, per runtime and output length",
		Long: `replay generates rows at each output cap on each runtime (sampled, seeded,
interleaved across caps), writes them as a generation record, then replays the
record the way ` + "`rig replay`" + ` does: forced token ids on llama-server, raw-mode
regeneration on Ollama. It prints the original and the replay wall time per
row, their ratio and the replay cost per output token side by side, with a
least-squares line of replay time on output tokens per runtime.

Goal: replay at most 1.2× the original generation on llama-server and at most
1.5× on Ollama, at every length, and linear in output length.

  rig bench replay
  rig bench replay --runtime llama-server --lengths 16,64,256 --rows 6
  rig bench replay --json

Exit status 1 when a goal is missed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.Runtimes, err = replayRuntimes("bench replay", runtime); err != nil {
				return err
			}
			res, err := replaycost.BenchReplay(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printBench(cmd.OutOrStdout(), "bench replay", res, res.Pass, asJSON)
		},
	}
	cmd.Flags().StringVar(&runtime, "runtime", "both", "llama-server, ollama or both")
	cmd.Flags().StringVar(&req.Model, "model", req.Model, "the model to generate and replay with (registry name)")
	cmd.Flags().IntSliceVar(&req.Lengths, "lengths", []int{16, 64, 128}, "output caps, in tokens")
	cmd.Flags().IntVar(&req.Rows, "rows", 5, "rows per runtime and length")
	cmd.Flags().StringVar(&req.WorkDir, "work-dir", "", "keep the record and runtime logs here (default: a temporary directory, removed after)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&req.NoSandbox, "no-sandbox", false, "run without network namespaces")
	cmd.Flags().BoolVar(&req.Prefill, "prefill", true, "also replay each llama-server row in prefill mode, side by side (goal ≤ 0.2× the original at 256 tokens and above)")
	cmd.Flags().Float64Var(&req.PrefillTolerance.Token, "prefill-tolerance-token", 0, "prefill's per-token tolerance in nats (0: rig's default)")
	cmd.Flags().Float64Var(&req.PrefillTolerance.Row, "prefill-tolerance-row", 0, "prefill's per-row mean tolerance in nats (0: rig's default)")
	return cmd
}

// replayRuntimes reads a replay command's --runtime: one runtime, or both.
func replayRuntimes(command, runtime string) ([]string, error) {
	switch runtime {
	case "both":
		return []string{"llama-server", "ollama"}, nil
	case "llama-server", "ollama":
		return []string{runtime}, nil
	}
	return nil, fmt.Errorf("%s: --runtime %q: want llama-server, ollama or both", command, runtime)
}

// printBench prints a bench's result as its table (or JSON with --json) and
// fails the command when the result missed a goal, so a script can tell.
func printBench(w io.Writer, name string, res interface{ WriteText(io.Writer) error }, pass, asJSON bool) error {
	if asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(w, string(b))
	} else if err := res.WriteText(w); err != nil {
		return err
	}
	if !pass {
		return fmt.Errorf("%s: a goal was missed", name)
	}
	return nil
}
