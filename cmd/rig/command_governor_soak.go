package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"rig/governor"
	"rig/governor/faults"
	"rig/internal/provision"
)

func newGovernorSoakCommand() *cobra.Command {
	opts := faults.Options{}
	var d time.Duration
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run normal generation under the governor and count false preemptions",
		Long: `soak runs ordinary generations on the provisioned llama-server for --duration
under a governor watching the real sensors (host memory, this process's memory
cgroup, NVML when a card is present, token progress). Nothing is wrong on
purpose, so every preemption it sees is a false one; the goal is zero over ten
minutes. Policies whose sensor is absent are switched off and said so.

Example:
  rig governor soak --duration 10m

Exit status 0 when no trial was preempted; 1 when one was, the runtime is not
provisioned (run make setup), or the soak was interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := faults.Soak(cmd.Context(), cmd.OutOrStdout(), d, opts)
			if err != nil {
				return err
			}
			if n := len(res.FalsePreemptions); n > 0 {
				return fmt.Errorf("%d false preemption(s) in %s of normal generation (see above; loosen the policy that tripped in the governor config, or find what really went wrong)", n, res.Duration)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&d, "duration", 10*time.Minute, "how long to generate")
	f.StringVar(&opts.StateDir, "state-dir", governor.DefaultStateDir(), "governor state directory (heartbeat, disk checks)")
	f.StringVar(&opts.WorkDir, "work-dir", "", "scratch directory (default: a temporary one)")
	f.StringVar(&opts.InstalledEnv, "installed-env", provision.Path(), "env file naming the provisioned runtimes")
	return cmd
}
