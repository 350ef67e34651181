package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func budgetShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print this month's cap, what is spent and what is left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := client(cmd).Budget(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), m.String())
			return nil
		},
	}
}
