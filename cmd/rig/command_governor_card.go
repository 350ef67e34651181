package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"rig/daemon"
	"rig/preflight"
)

func newGovernorCardCommand() *cobra.Command {
	var modelFile, budget string
	var noSandbox bool
	cmd := &cobra.Command{
		Use:   "card-check --model FILE --budget 256MiB",
		Short: "On a real card: the governor reads NVML and preempts a runtime above its card-memory budget",
		Long: `card-check starts the governor on this machine's real sensors (NVML for the
card), starts llama-server's CUDA build with every layer of --model on the card,
and watches one long generation as a trial held to --budget of card memory. A
budget below what the runtime holds must be preempted by the governor's
card-memory policy; the command prints the NVML readings, the runtime's own
per-process card memory, the preemption's reason and how long it took, and
fails when the governor did not preempt. Without a card it says so and stops.

  rig runtimes synth-model --shape 1b --out /tmp/synth-1b.gguf
  rig governor card-check --model /tmp/synth-1b.gguf --budget 256MiB`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			limit, err := preflight.ParseSize(budget)
			if err != nil || limit == 0 {
				return fmt.Errorf("--budget %q: give card memory, e.g. 256MiB", budget)
			}
			if modelFile == "" {
				return errors.New("--model: give a GGUF (rig runtimes synth-model writes one)")
			}
			return daemon.CardCheck(cmd.Context(), daemon.CardCheckOptions{Model: modelFile, Budget: uint64(limit), NoSandbox: noSandbox}, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&modelFile, "model", "", "the GGUF to load on the card")
	cmd.Flags().StringVar(&budget, "budget", "256MiB", "the trial's card-memory budget; below what the runtime holds, it must be preempted")
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run the runtime without its network namespace")
	return cmd
}
