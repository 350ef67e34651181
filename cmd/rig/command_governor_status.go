package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"rig/governor"
)

func newGovernorStatusCommand() *cobra.Command {
	var dir string
	var maxAge time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the fault suite's last pass and whether it is fresh enough for counted runs",
		Long: `status reads the newest passing fault-injection record in --state-dir and
prints when it ran, on which host, whether NVML was real or simulated, the
runtime it drove, and each class with its latency. Counted study runs refuse to
start when that pass is older than --max-age.

Example:
  rig governor status
  rig governor status --max-age 12h

Exit status 0 when a pass exists and is fresh; 1 when there is none or it is
stale (run rig governor faults).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := governor.LastPass(dir)
			if err != nil {
				return err
			}
			now := time.Now()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "last pass: %s (%s ago)\nhost: %s\nnvml: %s\nruntime: %s\nconfig: %s\n",
				r.At.UTC().Format(time.RFC3339), now.Sub(r.At).Round(time.Second), r.Host, r.NVML, r.Runtime, r.Config)
			tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CLASS\tEXPECTED\tOBSERVED\tREPS\tP50 MS\tP99 MS\tPASS")
			for _, c := range r.Classes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%.1f\t%t\n", c.Class, c.Expected, strings.Join(c.Observed, ","), c.Reps, c.P50MS, c.P99MS, c.Pass)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return governor.CheckFresh(dir, maxAge, now)
		},
	}
	cmd.Flags().StringVar(&dir, "state-dir", governor.DefaultStateDir(), "where rig governor faults stores its records")
	cmd.Flags().DurationVar(&maxAge, "max-age", governor.DefaultPassMaxAge, "how old the last pass may be")
	return cmd
}
