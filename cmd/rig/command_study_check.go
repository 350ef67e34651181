package main

import (
	"fmt"
	"rig/api"

	"github.com/spf13/cobra"
)

func studyCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check NAME",
		Short: "Check the study store's integrity: receipts decode, keys unique, no trial scored twice",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := client(cmd).Check(cmd.Context(), api.NameRequest{Name: args[0]})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "store ok: %d executions, %d receipts (%d counted), %d audit entries, %d governor events\n",
				sum.Executions, sum.Receipts, sum.Counted, sum.Audit, sum.Governor)
			return nil
		},
	}
}
