package main

import (
	"rig/api"

	"github.com/spf13/cobra"
)

func studyApproveCommand() *cobra.Command {
	var director, why string
	cmd := &cobra.Command{
		Use:   "approve NAME",
		Short: "Record the Director's approval of a reviewed study",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := client(cmd).Approve(cmd.Context(), api.NameRequest{Name: args[0], Actor: director, Why: why})
			if err != nil {
				return err
			}
			printStudy(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().StringVar(&director, "director", "", "optional, for readability: must be you, the Director (rig records the caller's identity)")
	cmd.Flags().StringVar(&why, "why", "", "why, for the audit log")
	return cmd
}
