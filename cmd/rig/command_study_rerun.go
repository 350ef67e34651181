package main

import (
	"fmt"
	"rig/api"
	"rig/daemon"
	"time"

	"github.com/spf13/cobra"
)

func studyRerunCommand() *cobra.Command {
	var key, engine string
	var inFlight int
	var startWait time.Duration
	cmd := &cobra.Command{
		Use:   "rerun NAME EXECUTION",
		Short: "Run a frozen study again as a new execution whose parent is EXECUTION",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := client(cmd).Run(cmd.Context(), api.RunRequest{Study: args[0], Key: key, Parent: args[1], Engine: engine, InFlight: inFlight, StartWait: startWait})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "execution %s started (attempt %d, parent %s)\n", info.ID, info.Attempt, info.Parent)
			for _, w := range info.Walls {
				fmt.Fprintln(cmd.OutOrStdout(), "derived "+w)
			}
			return follow(cmd.Context(), cmd, args[0], info.ID)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "idempotency key")
	cmd.Flags().StringVar(&engine, "engine", "", "local (this card, the default) or temporal (rig workers through the daemon's Temporal cluster)")
	cmd.Flags().IntVar(&inFlight, "in-flight", 0, fmt.Sprintf("with --engine temporal: trials of one task queue (runtime build and card class) running at once, counted in slots: the queue's workers × the arms' pins.slots (default %d; never under the widest arm's slots)", daemon.EngineDefaultInFlight))
	cmd.Flags().DurationVar(&startWait, "start-wait", 0, fmt.Sprintf("with --engine temporal: how long a trial waits for a worker of its task queue before it ends as an error receipt naming the queue, when no worker serves it (default %s)", daemon.EngineDefaultStartWait))
	return cmd
}
