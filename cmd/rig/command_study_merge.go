package main

import (
	"fmt"
	"rig/api"

	"github.com/spf13/cobra"
)

func studyMergeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "merge NAME [EXECUTION]",
		Short: "Bring a scale-out execution's spool into the store again (idempotent)",
		Long: `merge reads every finished entry the workers left in the spool for the
execution (default: the latest that ran through the engine) and merges it the
way the engine does: put-if-absent by trial key and attempt, digests checked
against the receipt. An entry already merged is a no-op, a different receipt
for a key and attempt already merged is kept apart as a divergent duplicate,
and an entry a worker never finished is left alone. Running it twice changes
nothing: rig receipts export prints the same bytes.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.MergeRequest{Study: args[0]}
			if len(args) == 2 {
				req.Execution = args[1]
			}
			sum, err := client(cmd).Merge(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "spool entries: %d; merged now %d, already merged %d, divergent duplicates kept apart %d, unfinished (never merged) %d\n",
				sum.Entries, sum.Merged, sum.Already, sum.Divergent, sum.Partial)
			for _, r := range sum.Refused {
				fmt.Fprintf(cmd.OutOrStdout(), "refused (not merged): %s\n", r)
			}
			return nil
		},
	}
}
