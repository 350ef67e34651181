package main

import (
	"fmt"
	"rig/api"
	"time"

	"github.com/spf13/cobra"
)

func studyDecideCommand() *cobra.Command {
	var req api.DecideRequest
	cmd := &cobra.Command{
		Use:   "decide NAME --comparison HASH --rationale TEXT",
		Short: "Record the decision the pre-registered rule assigns, citing the comparison you read",
		Long: `decide evaluates the design's decision rule exactly as written on the latest
finished execution and records the outcome, its logic, the actor, the rationale
and the comparison hash. A hash that no longer matches the inputs (receipts
changed since you read the report) is refused: read the new report first.

--key makes the request idempotent, as for register and run: the same key with
the same request returns the recorded decision; the same key with another
request is a conflict.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Study = args[0]
			rec, err := client(cmd).Decide(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "decision   %s (%s)\nnext baseline %s\nrecorded by %s at %s\n", rec.Action, rec.Verdict, rec.NextBaseline, rec.Actor, rec.At.Format(time.RFC3339))
			for _, t := range rec.Trace {
				fmt.Fprintln(cmd.OutOrStdout(), "  "+t)
			}
			if rec.Proposal != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "proposal   %s pending_approval: a Director approves it with rig proposal approve %s --why TEXT\n", rec.Proposal, rec.Proposal)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.ComparisonHash, "comparison", "", "the comparison hash printed by rig study report (required)")
	cmd.Flags().StringVar(&req.Rationale, "rationale", "", "why, in words")
	cmd.Flags().StringVar(&req.Actor, "actor", "", "optional: must be you, the Director (rig records the caller's identity)")
	cmd.Flags().StringVar(&req.Execution, "execution", "", "execution (default: the latest finished)")
	cmd.Flags().StringVar(&req.Key, "key", "", "idempotency key: the same key returns the recorded decision")
	return cmd
}
