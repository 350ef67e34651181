package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"rig/api"
)

// newProposalCommand builds `rig proposal`: the publish proposals a
// "switch to the challenger" decision writes.
func newProposalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proposal",
		Short: "List, show, approve or reject the baseline a decided study proposes",
		Long: `When rig study decide switches to the challenger, it writes a publish proposal:
the new incumbent's pins and digests as the baseline for the next study, with
the report and the comparison hash the decision rests on. A proposal is
pending_approval until a Director approves or rejects it, once:

  pending_approval → approved | rejected

Approval changes only what the next rig study init and rig study dry-run read
as the baseline; nothing that runs changes. It needs the director role, and
under a policy the Director who decided the study may not approve their own
proposal (another must).

  rig proposal list
  rig proposal show ID
  rig proposal approve ID --why "faster at the same pass rate"   (director role)
  rig proposal reject ID --why "p95 too close to the SLO"        (director role)`,
	}
	cmd.AddCommand(proposalListCommand(), proposalShowCommand(), proposalDecideCommand("approve", api.ProposalApproved, api.Client.ApproveProposal),
		proposalDecideCommand("reject", api.ProposalRejected, api.Client.RejectProposal))
	return cmd
}

func proposalDecideCommand(verb, to string, decide func(api.Client, context.Context, api.ProposalRequest) (api.Proposal, error)) *cobra.Command {
	var req api.ProposalRequest
	cmd := &cobra.Command{
		Use:   verb + " ID --why TEXT",
		Short: fmt.Sprintf("Move a pending proposal to %s (director role)", to),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.ID = args[0]
			p, err := decide(client(cmd), cmd.Context(), req)
			if err != nil {
				return err
			}
			printProposal(cmd.OutOrStdout(), p)
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Why, "why", "", "why, in words (required; recorded with who and when)")
	cmd.Flags().StringVar(&req.Actor, "actor", "", "optional: must be you (rig records the caller's identity)")
	return cmd
}

func printProposal(w io.Writer, p api.Proposal) {
	fmt.Fprintf(w, "%s  %s  study %s: %s (%s, model sha256 %.12s) on comparison %.12s, proposed by %s at %s",
		p.ID, p.State, p.Study, p.Arm, p.Runtime, p.ModelSHA256, p.ComparisonHash, p.ProposedBy, p.ProposedAt.Format(time.RFC3339))
	if p.DecidedBy != "" {
		fmt.Fprintf(w, "; %s by %s at %s: %s", p.State, p.DecidedBy, p.DecidedAt.Format(time.RFC3339), p.Why)
	}
	fmt.Fprintln(w)
}
