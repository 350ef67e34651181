package main

import (
	"fmt"
	"rig/api"
	"rig/daemon"
	"time"

	"github.com/spf13/cobra"
)

func studyRunCommand() *cobra.Command {
	var key, actor, engine string
	var detach, noGates bool
	var inFlight int
	var startWait time.Duration
	cmd := &cobra.Command{
		Use:   "run NAME",
		Short: "Take an approved study through its gates and start its counted run",
		Long: `run first performs each gate the study has not passed yet, in order: the
freeze of an approved study, the preflight, the validation run and the dry
run, each exactly as its own command does it (rig study freeze, preflight,
validate, dry-run) and recorded the same way, printing each verdict. It stops
before the counted run when a gate refuses or the dry run's price is over
the budget. --no-gates skips them and only asks for the run, which is
refused unless every gate has passed.

Then it asks the daemon to start an execution of the frozen study. The
daemon refuses unless every arm has a recorded "fits" preflight verdict, the
governor's fault suite passed recently and its heartbeat is fresh, and every
harness passed its validation run. Progress (trials done/total, current
trial, rate, ETA) is printed until the execution ends; Ctrl-C stops
following, not the run.

With --engine temporal the trials are spread over rig worker processes on
other machines through the daemon's Temporal cluster (rig daemon --temporal
HOST:PORT --spool DIR): each trial goes to a task queue named by its runtime
build and card class, the workers' receipts and generation records come back
through the shared spool and are merged exactly once, and progress shows how
many receipts each worker returned. See docs/scale-out.md.

  rig study run demo                      gates, then the run on this machine's card
  rig study run demo --no-gates           the run alone (every gate already passed)
  rig study run demo --engine temporal    on the workers`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !noGates {
				if err := runGates(cmd.Context(), client(cmd), args[0], cmd.OutOrStdout()); err != nil {
					return err
				}
			}
			info, err := client(cmd).Run(cmd.Context(), api.RunRequest{Study: args[0], Key: key, Actor: actor, Engine: engine, InFlight: inFlight, StartWait: startWait})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "execution %s started (attempt %d)\n", info.ID, info.Attempt)
			for _, w := range info.Walls {
				fmt.Fprintln(cmd.OutOrStdout(), "derived "+w)
			}
			if detach {
				return nil
			}
			return follow(cmd.Context(), cmd, args[0], info.ID)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "idempotency key: the same key returns the same execution")
	cmd.Flags().StringVar(&actor, "actor", "", "optional: must be you (rig records the caller's identity)")
	cmd.Flags().StringVar(&engine, "engine", "", "local (this card, the default) or temporal (rig workers through the daemon's Temporal cluster)")
	cmd.Flags().IntVar(&inFlight, "in-flight", 0, fmt.Sprintf("with --engine temporal: trials of one task queue (runtime build and card class) running at once, counted in slots: the queue's workers × the arms' pins.slots (default %d; never under the widest arm's slots)", daemon.EngineDefaultInFlight))
	cmd.Flags().DurationVar(&startWait, "start-wait", 0, fmt.Sprintf("with --engine temporal: how long a trial waits for a worker of its task queue before it ends as an error receipt naming the queue, when no worker serves it (default %s)", daemon.EngineDefaultStartWait))
	cmd.Flags().BoolVar(&detach, "detach", false, "return at once; follow with rig study status")
	cmd.Flags().BoolVar(&noGates, "no-gates", false, "do not perform the gates not yet passed (freeze, preflight, validation, dry run): only ask for the run")
	return cmd
}
