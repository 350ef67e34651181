package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func proposalListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every proposal with its state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := client(cmd).Proposals(cmd.Context())
			if err != nil {
				return err
			}
			if len(ps) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no proposals (a decision that switches to the challenger writes one)")
			}
			for _, p := range ps {
				printProposal(cmd.OutOrStdout(), p)
			}
			return nil
		},
	}
}
