package main

import (
	"fmt"
	"rig/api"

	"github.com/spf13/cobra"
)

func studyReplayCommand() *cobra.Command {
	var req api.EngineReplayRequest
	cmd := &cobra.Command{
		Use:   "replay NAME",
		Short: "Replay a sample of a scale-out execution's trials on the workers, each on the queue it ran on",
		Long: `replay picks --per-arm merged trials of every arm of an execution that ran
through the engine (default: the latest), seeded by --seed, and has a worker
replay each trial's own generation record on the task queue the trial ran on:
the same runtime build and card class. Each record's sha256 is checked against
the merged receipt before anything starts. It prints, per trial, the worker
that replayed it and whether every replayed row reproduced.

For an execution on this machine's card, rig study report --replay-sample
replays through the daemon instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Study = args[0]
			out, err := client(cmd).EngineReplay(cmd.Context(), req)
			if err != nil {
				return err
			}
			bad := 0
			for _, r := range out {
				fmt.Fprintf(cmd.OutOrStdout(), "%-40s attempt %d on %s via %s: %s (%d/%d rows reproduced, max |Δ| %.3g)\n",
					r.Key, r.Attempt, r.Worker, r.Queue, r.Status, r.Reproduced, r.Replayed, r.MaxAbsDiff)
				if r.Status != api.ReplayReproduced {
					bad++
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d replayed trials did not reproduce", bad, len(out))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Execution, "execution", "", "the execution (default: the latest that ran through the engine)")
	cmd.Flags().IntVar(&req.PerArm, "per-arm", 2, "trials replayed per arm")
	cmd.Flags().Uint64Var(&req.Seed, "seed", 1, "the sample's seed")
	return cmd
}
