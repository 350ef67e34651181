package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func studyListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the studies registered on this machine",
		RunE: func(cmd *cobra.Command, _ []string) error {
			names, err := client(cmd).List(cmd.Context())
			if err != nil {
				return err
			}
			for _, n := range names {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return nil
		},
	}
}
