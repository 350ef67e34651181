package main

import (
	"cmp"
	"fmt"
	"rig/runtimes"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newRuntimesCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Print what is installed, where, its version and sha256, and what is missing",
		Long: `check reads the pin file compiled into rig (internal/provision/pins.env) and the
cache that make setup fills ($RIG_CACHE, default ~/.cache/rig), and prints each
runtime and model: its path, version and sha256, and whether it matches its pin.
Each runtime build says its backend (cpu, cuda) and the devices it sees itself
(llama-server --list-devices): a CUDA build on a machine with no card says why
it found none. llama-server+cuda is "not built" where setup found no card; that
is the CPU path, not a failure (RIG_CUDA_ARCHS=90 make setup builds it anyway).
Anything missing is listed with the command that fixes it. Exit status 1 when
something is missing or differs from its pin.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			report, ok := runtimes.Check()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "COMPONENT\tSTATUS\tBACKEND\tVERSION\tSHA256\tPATH")
			for _, c := range report {
				sum := c.SHA256
				if len(sum) > 16 {
					sum = sum[:16] + "…"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Status, cmp.Or(c.Backend, "-"), c.Version, sum, c.Path)
			}
			w.Flush()
			for _, c := range report {
				if c.Status == "ok" && strings.HasPrefix(c.Name, "llama-server") {
					devs := "none listed (computes on the host)"
					if len(c.Devices) > 0 {
						devs = strings.Join(c.Devices, "; ")
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s devices: %s\n", c.Name, devs)
				}
				if c.CPUBackend != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s CPU backend: %s\n", c.Name, c.CPUBackend)
				}
			}
			for _, c := range report {
				if c.Fix != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", c.Name, c.Fix)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "machine:", runtimes.ReadMachine())
			if !ok {
				return fmt.Errorf("some components are missing or differ from their pins (run: make setup)")
			}
			return nil
		},
	}
}
