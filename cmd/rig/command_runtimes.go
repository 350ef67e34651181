package main

import (
	"github.com/spf13/cobra"
)

func newRuntimesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runtimes",
		Short: "Check and exercise the provisioned runtimes and models",
	}
	cmd.AddCommand(newRuntimesCheckCommand(), newRuntimesSmokeCommand(), newRuntimesSynthModelCommand())
	return cmd
}
