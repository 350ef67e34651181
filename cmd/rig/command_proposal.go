package main

import (
	"context"
	"encoding/json"
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
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print one proposal as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := client(cmd).Proposal(cmd.Context(), api.ProposalRequest{ID: args[0]})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(p)
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List every proposal with its state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := client(cmd).Proposals(cmd.Context())
			if err != nil {
				return err
			}
			if len(ps) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no proposals (a decision that switches to the challenger writes one)")
			}
			for _, p := range ps {
				printProposal(cmd.OutOrStdout(), p)
			}
			return nil
		},
	}
	cmd.AddCommand(list, show, proposalDecideCommand("approve", api.ProposalApproved, api.Client.ApproveProposal),
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

// newBudgetCommand builds `rig budget`: the monthly cap across studies.
func newBudgetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budget",
		Short: "Show or set the monthly wall-time and energy budget across every study on this machine",
		Long: `The monthly budget caps what every study on this machine may spend in one
calendar month (UTC): wall time and energy, counted from every receipt of
every study started that month. A run the month cannot hold (priced as the
dry run prices it) is refused, naming what is left, until the cap is raised.
rig study dry-run prints the month's budget. Setting it needs the operator role.

  rig budget show
  rig budget set --wall 200h --energy-wh 20000 --why "May's share"   (operator role)`,
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print this month's cap, what is spent and what is left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := client(cmd).Budget(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), m.String())
			return nil
		},
	}
	var req api.BudgetRequest
	set := &cobra.Command{
		Use:   "set --wall DURATION --energy-wh WH --why TEXT",
		Short: "Set the monthly cap (operator role)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := client(cmd).SetBudget(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "monthly budget %s and %.1f Wh, set by %s\n", b.WallTime, b.EnergyWh, b.SetBy)
			return nil
		},
	}
	set.Flags().StringVar(&req.WallTime, "wall", "", "wall time per month, a Go duration such as 200h")
	set.Flags().Float64Var(&req.EnergyWh, "energy-wh", 0, "energy per month in watt-hours")
	set.Flags().StringVar(&req.Why, "why", "", "why, in words")
	set.Flags().StringVar(&req.Actor, "actor", "", "optional: must be you")
	cmd.AddCommand(show, set)
	return cmd
}
