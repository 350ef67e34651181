package main

import (
	"github.com/spf13/cobra"

	"rig/genrecord"
)

func newSchemaGenerationsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "generations",
		Short: "Print the JSON Schema of one generations.jsonl line",
		Long: `generations prints the JSON Schema (draft 2020-12) of one line of a
generation record (generations.jsonl): the header line with the run's pins, or
a row with the chosen tokens and their top-K log-probabilities. Tools outside
rig that read or replay a record validate against it.

Example:
  rig schema generations > generations.schema.json

Exit status 0, or 1 when the schema cannot be written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(genrecord.Schema())
			return err
		},
	}
}
