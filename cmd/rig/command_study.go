package main

import (
	"context"
	"io"
	"rig/api"

	"github.com/spf13/cobra"
)

func newStudyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "study",
		Short: "Register, review, approve, freeze, run and decide a model-comparison study",
		Long: `A study goes draft → reviewed → approved → frozen → running → decided, or is
withdrawn before its first counted run. Each step
is checked and audited (who, when, why). All commands but init talk to the
resident daemon (rig daemon), which owns the study stores and the card. Who
you are is what the daemon reads from the socket (your uid), never a flag; the
roles each step needs come from the daemon's policy (docs/security.md). Under a
policy, the registrant may not review or approve, and the reviewer may not
approve.

  rig study init design.yaml                 a commented example to edit
  rig study register design.yaml             licences checked, pins fingerprinted
  rig study review NAME --verdict pass --licence-line "..."   (reviewer role)
  rig study approve NAME                     (director role)
  rig study freeze NAME                      content-addressed snapshot
  rig study preflight NAME                   fit verdict per arm at the card profile
  rig study validate NAME                    one free validation run per harness
  rig study run NAME                         counted run, with progress
  rig study status NAME | cancel NAME | rerun NAME EXEC
  rig study decide NAME --comparison HASH --rationale "..."   (director role; asks, or --yes)
  rig study amend-decision NAME --rationale "..."             a correction; the decision stays
  rig study withdraw NAME --why "..."        before a counted run (registrant or Director)`,
	}
	cmd.AddCommand(newStudyInitCommand(), studyRegisterCommand(), studyReviewCommand(), studyApproveCommand(), studyWithdrawCommand(),
		studyFreezeCommand(), studyPreflightCommand(), studyValidateCommand(), studyCancelCommand(),
		studyRunCommand(), studyRerunCommand(), studyReportCommand(), studyDecideCommand(), studyAmendDecisionCommand(), studyCheckCommand(), studyMergeCommand(), studyReplayCommand(), studyDryRunCommand(), studyStatusCommand(), studyListCommand())
	return cmd
}

// studyCall is one of the daemon's calls on a named study whose reply the
// command does not print; what the daemon wrote for the user goes to text.
type studyCall func(ctx context.Context, c api.Client, req api.NameRequest, text io.Writer) error

func studySimpleCommand(use, short string, call studyCall) *cobra.Command {
	var actor string
	cmd := &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.NameRequest{Name: args[0], Actor: actor}
			send := func(text io.Writer) error { return call(cmd.Context(), client(cmd), req, text) }
			var err error
			if use == "validate" {
				err = withHeartbeat(cmd.Context(), cmd.OutOrStdout(), socketPath(cmd), args[0], "validating", send)
			} else {
				err = send(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if use == "freeze" {
				_, err := printStatus(cmd, args[0])
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "optional: must be you (rig records the caller's identity)")
	return cmd
}
