package main

import (
	"strings"

	"github.com/spf13/cobra"

	"rig/governor"
	"rig/governor/faults"
	"rig/internal/provision"
)

func newGovernorFaultsCommand() *cobra.Command {
	opts := faults.Options{}
	cmd := &cobra.Command{
		Use:   "faults",
		Short: "Run the governor's fault-injection suite and store a dated record",
		Long: `faults injects each fault class into a live governor watching real trials
(over-temperature, over-power, memory pressure, a hung runtime, sensor loss, a
full disk, a killed runtime, …), repeats each, and checks that the governor
took the expected action within its time goal, that the trial was marked
preempted and never scored, rerun with its parent, and that nothing was lost.
It prints one row per class and stores a dated record in --state-dir. Counted
study runs refuse to start when the newest passing record is older than a day
(see rig governor status); deploy/systemd's timer runs this twice a day.

A run with --class is partial and never passes: it is for working on one
class. Classes: ` + strings.Join(faults.ClassNames(), ", ") + `.

Example:
  rig governor faults
  rig governor faults --class over-temperature --repetitions 1

Exit status 0 when every class passed and the record was stored; 1 when a
class failed or was skipped, or the record cannot be written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := faults.Run(cmd.Context(), cmd.OutOrStdout(), opts)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.StateDir, "state-dir", governor.DefaultStateDir(), "where dated records go; the study gate reads them")
	f.StringVar(&opts.WorkDir, "work-dir", "", "scratch directory (default: a temporary one)")
	f.IntVar(&opts.Repetitions, "repetitions", 5, "repetitions per class")
	f.StringSliceVar(&opts.Classes, "class", nil, "run only these classes (a partial run never passes)")
	f.StringVar(&opts.InstalledEnv, "installed-env", provision.Path(), "env file naming the provisioned runtimes")
	return cmd
}
