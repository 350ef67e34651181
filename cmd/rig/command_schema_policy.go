package main

import (
	"github.com/spf13/cobra"

	"rig/daemon"
)

func newSchemaPolicyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "policy",
		Short: "Print the JSON Schema of the daemon's policy file (who holds which role)",
		Long: `policy prints the JSON Schema (draft 2020-12) of the daemon's policy file:
users and groups mapped to the roles staff, reviewer, director and operator,
and the socket_group that may connect. The daemon checks more when it loads
the file: that the named group exists, and that the file and its folder belong
to root or the daemon's user and are writable by nobody else
(docs/security.md).

Example:
  rig schema policy > policy.schema.json

Exit status 0, or 1 when the schema cannot be written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(daemon.PolicySchema())
			return err
		},
	}
}
