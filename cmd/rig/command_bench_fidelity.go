package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"rig/fidelity"
)

func newBenchFidelityCommand() *cobra.Command {
	var f fidelityFlags
	cmd := &cobra.Command{
		Use:   "fidelity --reference REF.gguf --arm ARM.gguf --text FILE",
		Short: "What the fidelity measure costs, as a ratio of generating the same tokens",
		Long: `fidelity runs ` + "`rig fidelity`" + ` on the text, then times generating the very
tokens it scored with each arm's model on the same library and threads:
each chunk's first half in one call, then one decode step per scored token,
as generation runs them (sampling and the server aside, so generation is
timed at its cheapest). It prints both times past model loading, processor
time (over every thread; a busy machine's waiting does not inflate it) and
wall time, and their ratios. The measure's time covers both models' passes
(reference and arm).

Prefill scores every token of a chunk in physical batches, so the ratio
falls as the scored share of tokens grows; with llama-perplexity's chunking
half of each chunk is context that generation would also have to prefill.

  rig bench fidelity --reference SmolLM2.Q8_0.gguf --arm SmolLM2.Q4_1.gguf --text wiki.txt --ctx 256`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, cleanup, err := f.request("bench fidelity")
			defer cleanup()
			if err != nil {
				return err
			}
			res, err := fidelity.MeasureText(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("bench fidelity: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "Fidelity's cost against generating the scored tokens (%d chunks of %d, %d scored tokens; times past loading).\n", res.Chunks, res.Ctx, res.Arms[0].Tokens)
			fmt.Fprintln(w, "arm\ttime\tfidelity (reference + arm)\tgenerating (arm)\tratio\tper scored token\t")
			for i, arm := range req.Arms {
				gen, err := req.Scorer.Generate(cmd.Context(), arm, req.Ctx, res.Segments())
				if err != nil {
					return fmt.Errorf("bench fidelity: %w", err)
				}
				n := float64(res.Arms[i].Tokens)
				for _, row := range []struct {
					what     string
					fid, gen time.Duration
				}{{"processor", res.Busy[i].CPU, gen.CPU}, {"wall", res.Busy[i].Wall, gen.Wall}} {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.3f×\t%.2f ms against %.2f ms\t\n", res.Arms[i].Arm, row.what, row.fid.Round(time.Millisecond), row.gen.Round(time.Millisecond),
						row.fid.Seconds()/row.gen.Seconds(), 1000*row.fid.Seconds()/n, 1000*row.gen.Seconds()/n)
				}
			}
			return w.Flush()
		},
	}
	f.add(cmd)
	return cmd
}
