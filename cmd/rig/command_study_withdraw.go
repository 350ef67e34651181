package main

import (
	"errors"

	"github.com/spf13/cobra"

	"rig/api"
)

func studyWithdrawCommand() *cobra.Command {
	var why string
	cmd := &cobra.Command{
		Use:   "withdraw NAME",
		Short: "Withdraw a study before its first counted run (registrant or Director; audited)",
		Long: `withdraw takes a study back: its state becomes withdrawn, the reason goes in
its audit log, and nothing more is run or decided under it. It is allowed from
draft, reviewed, approved or frozen, until a counted run starts (validation
runs do not count); after that the receipts are evidence, and the study is
decided or left. The registrant may withdraw their own study, a Director any.

The name stays taken, with the record: to go again with a changed design,
register it under a new name (edit the design's name, or
rig study register DESIGN --name NEW-NAME).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if why == "" {
				return errors.New("--why: a withdrawal needs its reason, for the audit log (e.g. --why \"two prompts too long; going again with them excluded\")")
			}
			info, err := client(cmd).Withdraw(cmd.Context(), api.NameRequest{Name: args[0], Why: why})
			if err != nil {
				return err
			}
			printStudy(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().StringVar(&why, "why", "", "why the study is withdrawn, for the audit log (required)")
	return cmd
}
