package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"rig/api"
)

func studyAmendDecisionCommand() *cobra.Command {
	var req api.AmendDecisionRequest
	var yes bool
	cmd := &cobra.Command{
		Use:   "amend-decision NAME --rationale TEXT",
		Short: "Append a correction to a study's recorded decision (the decision stays; audited)",
		Long: `amend-decision appends a correction to the study's recorded decision, with its
own rationale, actor (the caller) and time, and names the decision it amends.
The decision itself never changes: its record, outcome and comparison stay as
they were written, and the report shows each amendment after it, labelled. A
study may be amended several times; the amendments keep their order. Each is
an entry in the study's audit log.

As for decide, it is a Director's step, refused to the study's registrant and
to its reviewer; it shows what it will append and asks first, --yes appends
without asking, and without a terminal and without --yes it refuses. A study
with no recorded decision has nothing to amend.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Study = args[0]
			if req.Rationale == "" {
				return errors.New("--rationale: an amendment needs its own rationale, for the audit log (e.g. --rationale \"the rationale named the wrong arm: the rule shipped gemma\")")
			}
			c := client(cmd)
			out := cmd.OutOrStdout()
			ok, err := confirm(cmd, yes, "Append this amendment?", func() error {
				preview := req
				preview.Preview = true
				a, err := c.AmendDecision(cmd.Context(), preview)
				if err != nil {
					return err
				}
				printAmendment(out, "rig will append this amendment:", a)
				return nil
			})
			if err != nil || !ok {
				return err
			}
			a, err := c.AmendDecision(cmd.Context(), req)
			if err != nil {
				return err
			}
			printAmendment(out, "amended:", a)
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Rationale, "rationale", "", "the correction, in words (required)")
	cmd.Flags().StringVar(&req.Actor, "actor", "", "optional: must be you, a Director (rig records the caller's identity)")
	cmd.Flags().BoolVar(&yes, "yes", false, "append without showing the amendment and asking first (needed when stdin is not a terminal)")
	return cmd
}

// printAmendment is every field of an amendment, under a heading.
func printAmendment(w io.Writer, heading string, a api.DecisionAmendment) {
	fmt.Fprintf(w, "%s\n  study          %s\n  amendment      %d of the decision on %s recorded at %s\n  rationale      %s\n  actor          %s\n",
		heading, a.Study, a.Seq, a.Execution, a.DecidedAt.Format(time.RFC3339), a.Rationale, a.Actor)
	if !a.Preview {
		fmt.Fprintf(w, "  at             %s\n", a.At.Format(time.RFC3339))
	}
}
