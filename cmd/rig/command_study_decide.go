package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"rig/api"
)

func studyDecideCommand() *cobra.Command {
	var req api.DecideRequest
	var yes bool
	cmd := &cobra.Command{
		Use:   "decide NAME --comparison HASH --rationale TEXT",
		Short: "Record the decision the pre-registered rule assigns, citing the comparison you read",
		Long: `decide evaluates the design's decision rule exactly as written on the latest
finished execution and records the outcome, its logic, the actor, the rationale
and the comparison hash. A hash that no longer matches the inputs (receipts
changed since you read the report) is refused: read the new report first.

A decision is final, so decide first shows what it will record (the daemon
runs every check a decision runs and writes nothing) and asks "Record this
decision? [y/N]". --yes records without asking; without a terminal to ask on
(a script, a pipe) and without --yes it refuses and records nothing. A
rationale to correct later is amended, not rewritten: rig study
amend-decision.

--key makes the request idempotent, as for register and run: the same key with
the same request returns the recorded decision; the same key with another
request is a conflict.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Study = args[0]
			c := client(cmd)
			out := cmd.OutOrStdout()
			recorded := false
			ok, err := confirm(cmd, yes, "Record this decision?", func() error {
				preview := req
				preview.Preview = true
				rec, err := c.Decide(cmd.Context(), preview)
				if err != nil {
					return err
				}
				if recorded = !rec.Preview; recorded {
					fmt.Fprintf(out, "already recorded under --key %s:\n", req.Key)
					printDecision(out, rec)
					return nil
				}
				printDecisionPreview(out, rec)
				return nil
			})
			if err != nil || !ok || recorded {
				return err
			}
			rec, err := c.Decide(cmd.Context(), req)
			if err != nil {
				return err
			}
			printDecision(out, rec)
			return nil
		},
	}
	cmd.Flags().StringVar(&req.ComparisonHash, "comparison", "", "the comparison hash printed by rig study report (required)")
	cmd.Flags().StringVar(&req.Rationale, "rationale", "", "why, in words")
	cmd.Flags().StringVar(&req.Actor, "actor", "", "optional: must be you, the Director (rig records the caller's identity)")
	cmd.Flags().StringVar(&req.Execution, "execution", "", "execution (default: the latest finished)")
	cmd.Flags().StringVar(&req.Key, "key", "", "idempotency key: the same key returns the recorded decision")
	cmd.Flags().BoolVar(&yes, "yes", false, "record without showing the decision and asking first (needed when stdin is not a terminal)")
	return cmd
}

// printDecisionPreview is every field decide will record, as the daemon's
// preview gave them.
func printDecisionPreview(w io.Writer, rec api.DecisionRecord) {
	fmt.Fprintf(w, "rig will record this decision:\n  study          %s\n  execution      %s\n  outcome        %s (%s)\n", rec.Study, rec.Execution, rec.Action, rec.Verdict)
	if rec.Arm != "" {
		fmt.Fprintf(w, "  winner         %s\n", rec.Arm)
	}
	fmt.Fprintf(w, "  next baseline  %s\n  rationale      %s\n  comparison     %s\n  actor          %s\n", rec.NextBaseline, rec.Rationale, rec.ComparisonHash, rec.Actor)
	if len(rec.Trace) > 0 {
		fmt.Fprintln(w, "  how the rule reached it:")
		for _, t := range rec.Trace {
			fmt.Fprintln(w, "    "+t)
		}
	}
}

// printDecision is the decision as recorded.
func printDecision(w io.Writer, rec api.DecisionRecord) {
	fmt.Fprintf(w, "decision   %s (%s)\nnext baseline %s\nrecorded by %s at %s\n", rec.Action, rec.Verdict, rec.NextBaseline, rec.Actor, rec.At.Format(time.RFC3339))
	for _, t := range rec.Trace {
		fmt.Fprintln(w, "  "+t)
	}
	if rec.Proposal != "" {
		fmt.Fprintf(w, "proposal   %s pending_approval: a Director approves it with rig proposal approve %s --why TEXT\n", rec.Proposal, rec.Proposal)
	}
}
