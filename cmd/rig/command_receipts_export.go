package main

import (
	"rig/api"

	"github.com/spf13/cobra"
)

func newReceiptsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "receipts", Short: "Export a study's receipts in the shared schema"}
	var format string
	var audit bool
	export := &cobra.Command{
		Use:   "export NAME",
		Short: "Write every receipt of the study as JSONL (default) or CSV on standard output",
		Long: `export writes every receipt in the shared, versioned receipt schema (each row
carries schema_version) so a later study can reuse them, for example effort
against difficulty for each model.

  rig receipts export demo-small-models > receipts.jsonl
  rig receipts export demo-small-models --format csv > receipts.csv
  rig receipts export demo-small-models --audit     the audit trail: who did what, when`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return client(cmd).Export(cmd.Context(), api.NameRequest{Name: args[0], Format: format, Audit: audit}, cmd.OutOrStdout())
		},
	}
	export.Flags().StringVar(&format, "format", "jsonl", "jsonl or csv")
	export.Flags().BoolVar(&audit, "audit", false, "write the store's audit trail (JSONL) instead of the receipts")
	cmd.AddCommand(export)
	return cmd
}
