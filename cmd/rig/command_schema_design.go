package main

import (
	"github.com/spf13/cobra"

	"rig/studies"
)

func newSchemaDesignCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "design",
		Short: "Print the JSON Schema of a study design file",
		Long: `design prints the JSON Schema (draft 2020-12) of a study's design file to
standard output, for an editor's completion and checks. The schema states the
shape of the file; rules that span fields (a pair naming an arm that exists,
pins shared across arms) are checked by rig when the design is loaded.

Example:
  rig schema design > design.schema.json

Exit status 0, or 1 when the schema cannot be written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(studies.DesignSchema())
			return err
		},
	}
}
