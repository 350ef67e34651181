package main

import (
	"github.com/spf13/cobra"
)

func studyStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Print a study's state, licences, executions and audit log",
		Long: `status prints where the study is: its state and hashes, licences, executions,
the gates before a run, what a request is doing now, and the audit log: every
step in order, who took it (the identity the daemon read from the socket),
when, from which state to which, and why.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := printStatus(cmd, args[0])
			if err != nil {
				return err
			}
			printAudit(cmd.OutOrStdout(), info.Audit)
			return nil
		},
	}
}
