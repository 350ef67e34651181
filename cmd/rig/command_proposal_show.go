package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"rig/api"
)

func proposalShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Print one proposal as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := client(cmd).Proposal(cmd.Context(), api.ProposalRequest{ID: args[0]})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(p)
		},
	}
}
