package main

import (
	"context"
	"errors"
	"fmt"
	"rig/api"
	"time"

	"github.com/spf13/cobra"
)

// follow prints progress until the execution ends.
func follow(ctx context.Context, cmd *cobra.Command, name, id string) error {
	last, engine := "", false
	c := client(cmd)
	for {
		info, err := c.Status(ctx, api.NameRequest{Name: name})
		if err != nil && engine && (errors.Is(err, api.ErrNoDaemon) || errors.Is(err, api.ErrDaemonStopped)) {
			// The workers and the engine run the trials, not the daemon:
			// the run goes on, and its merges wait for the coordinator.
			gone := api.ErrNoDaemon
			if errors.Is(err, api.ErrDaemonStopped) {
				gone = api.ErrDaemonStopped
			}
			return fmt.Errorf("%w (socket %s): execution %s goes on on the workers through the engine, and its receipts wait for the coordinator: start the daemon again with the same --temporal and --spool it had (or the same RIG_TEMPORAL and RIG_SPOOL), then follow the run with: rig study status %s",
				gone, socketPath(cmd), id, name)
		}
		if err != nil {
			return err
		}
		for _, e := range info.Executions {
			if e.ID != id {
				continue
			}
			engine = e.Engine != ""
			line := fmt.Sprintf("%s: %d/%d trials, %d preempted and rerun, %d failed (not scored), %.1f/min, ETA %s, now %s", e.Status, e.Done, e.Planned, e.Preempted, e.Failed, e.RatePerMin, orDash(e.ETA), orDash(e.Current))
			if e.Status != api.ExecStatusRunning {
				// Ended: a time left or a trial running now would be stale
				// (a stopped execution leaves planned trials unrun on purpose).
				line = fmt.Sprintf("%s: %d/%d trials, %d preempted and rerun, %d failed (not scored), %.1f/min", e.Status, e.Done, e.Planned, e.Preempted, e.Failed, e.RatePerMin)
			}
			if e.Engine != "" {
				line += ", " + workerCounts(e.Workers)
			}
			if line != last {
				fmt.Fprintf(cmd.OutOrStdout(), "[%s] %s\n", time.Now().Format("15:04:05"), line)
				last = line
			}
			if e.Status != api.ExecStatusRunning {
				if e.Error != "" {
					return fmt.Errorf("execution %s %s: %s", id, e.Status, e.Error)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "receipts: %s/store.bolt\ngeneration records: %s\n", info.Dir, e.Records)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(cmd.OutOrStdout(), "stopped following; the execution goes on (rig study status", name+")")
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}
