package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"rig/bench/scale"
)

func newBenchScaleCommand() *cobra.Command {
	var fanout, overhead, tasks, workers, samples int
	var fleet scale.FleetOptions
	var design string
	var skipThroughput bool
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure scale-out: throughput with 2 workers against 1, engine overhead per trial, a 100,000-trial fan-out",
		Long: `scale measures the scale-out engine on this machine, side by side in one run,
on a private Temporal dev server (127.0.0.1 only):

  throughput   the same small study (--tasks tasks of the quick example, two
               arms, real runtimes, each on one thread) run through the engine
               with 1 rig worker and with --workers N (default 2), --samples
               runs of each interleaved (1, N, 1, N, …); the ratio of mean
               trials per minute (goal >= 0.85 N: 1.7x for 2). All workers
               share this machine's cores, so N beyond the cores measures
               the cores, not the engine
  overhead     --overhead synthetic trials through the study workflow (a
               trial activity that runs no model, a coordinator that stores
               nothing): from "activity scheduled" to "runner started", p50
               and p99 (goal <= 50 ms and <= 200 ms)
  fan-out      a --fanout-trial synthetic plan (default 100,000) submitted and
               fanned out in chunks by the same workflows a study uses: the
               time it takes and the history sizes against Temporal's limits
  fleet        with --fleet N: N synthetic workers in this process, each a
               real rig worker (its checks, its one card slot, heartbeat, the
               real runner and spool entry) whose runtime is a --fleet-hold
               sleep, serving the real coordinator (plan, chunks, the merge
               with its trust checks and re-grade, receipts in a real store)
               for a --fleet-trials plan: the most trials in flight (goal: N),
               the overhead per trial from its scheduling to its merged
               receipt less the hold, p50 and p99 (goal <= 50 ms and
               <= 200 ms) split by phase, the largest history (limit 20,000
               events), and one counted receipt per planned trial

Throughput starts a daemon, registers, freezes, preflights and validates the
bench study in a temporary home: a few minutes. --skip-throughput leaves it out.

  rig bench scale
  rig bench scale --fanout 10000 --skip-throughput
  rig bench scale --skip-throughput --fanout 1000 --fleet 100 --fleet-trials 10000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			lines, err := scale.Run(cmd.Context(), scale.Options{Bin: bin, Fanout: fanout, Overhead: overhead, Tasks: tasks,
				Design: design, SkipThroughput: skipThroughput, Workers: workers, Samples: samples, Fleet: fleet}, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "\nscale-out figures (one run, side by side):")
			for _, l := range lines {
				fmt.Fprintln(out, "  "+l)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&fanout, "fanout", 100000, "trials in the fan-out plan")
	cmd.Flags().IntVar(&overhead, "overhead", 2000, "synthetic trials timed for the engine overhead")
	cmd.Flags().IntVar(&tasks, "tasks", 12, "tasks of the throughput study (two arms, one repeat)")
	cmd.Flags().IntVar(&workers, "workers", 2, "N of the throughput's 1 worker against N")
	cmd.Flags().IntVar(&samples, "samples", 2, "runs of each worker count, interleaved 1, N, 1, N, …")
	cmd.Flags().StringVar(&design, "design", "examples/quick-study/design.json", "the design the throughput study is cut from")
	cmd.Flags().IntVar(&fleet.Workers, "fleet", 0, "synthetic workers of the fleet run (0 leaves it out; 100 is a fleet)")
	cmd.Flags().IntVar(&fleet.Trials, "fleet-trials", 10000, "planned trials of the fleet run (two arms × tasks × 5 repeats)")
	cmd.Flags().DurationVar(&fleet.Hold, "fleet-hold", 3*time.Second, "each synthetic trial's generation, a sleep; long enough that the engine can keep every worker busy")
	cmd.Flags().BoolVar(&skipThroughput, "skip-throughput", false, "leave out the real-runtime throughput run")
	return cmd
}
