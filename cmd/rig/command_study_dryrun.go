package main

import (
	"path/filepath"
	"rig/api"

	"github.com/spf13/cobra"
)

func studyDryRunCommand() *cobra.Command {
	var speeds string
	cmd := &cobra.Command{
		Use:   "dry-run NAME",
		Short: "Price every arm x task x repeat in wall time and energy; execute nothing",
		Long: `dry-run prices the frozen study's whole plan from a pilot's speed table
(--speeds FILE, JSON: {"ARM": {"gen_tokens_per_sec": ..., "source": "pilot"}})
or, without one, from the speeds measured in this machine's validation runs,
and says which. A plan over the design's wall-time or energy cap is refused
(exit status 1) before anything runs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if speeds != "" {
				abs, err := filepath.Abs(speeds)
				if err != nil {
					return err
				}
				speeds = abs
			}
			_, err := client(cmd).DryRun(cmd.Context(), api.DryRunRequest{Name: args[0], Speeds: speeds}, cmd.OutOrStdout())
			return err
		},
	}
	cmd.Flags().StringVar(&speeds, "speeds", "", "a pilot's speed table (JSON)")
	return cmd
}
