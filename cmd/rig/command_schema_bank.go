package main

import (
	"github.com/spf13/cobra"

	"rig/tasks"
)

func newSchemaBankCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "bank",
		Short: "Print the JSON Schema of a task bank's header and task lines",
		Long: `bank prints the JSON Schema (draft 2020-12) of one line of a task bank to
standard output: line 1 is the header ($defs/header), every further line a task
($defs/task). The schema states each line's shape; rig also checks what spans
lines (the header comes first, ids are unique, every task has the header's
job kind) and each key's shape for its grader, with rig tasks lint.

Example:
  rig schema bank > bank.schema.json
  # check every line of a bank with any JSON Schema validator, or simply:
  rig tasks lint banks/qa.jsonl

Exit status 0, or 1 when the schema cannot be written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(tasks.BankSchema())
			return err
		},
	}
}
