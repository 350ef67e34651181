package main

import (
	"github.com/spf13/cobra"

	"rig/tasks"
	"rig/tasks/sandboxed"
)

func newTasksLintCommand() *cobra.Command {
	var noSandbox bool
	cmd := &cobra.Command{
		Use:   "lint BANK",
		Short: "Report a task bank's templates, difficulty mix, duplicates and failing keys",
		Long: `lint parses a task bank (JSONL: a header line, then one task a line) strictly
and reports what decides how much it can show: the number of distinct
templates (the count that matters, not the task count), the difficulty mix, the
hold-out count, exact duplicates, near duplicates (word 3-gram Jaccard >= 0.90),
public-benchmark tasks (a high score there may be recall) and every key that
fails its own grader. A code task's key is checked by running the bank's test
command inside the loopback-only sandbox, as graders do (--no-sandbox only for
a bank you trust). A parse error names file:line, the field and the fix.

Example:
  rig tasks lint tasks/banks/extract-json.jsonl

Exit status 0 when the bank parses and has no exact duplicates or failing
keys; 1 otherwise. Near duplicates and warnings are printed but do not fail.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := tasks.RunLint(cmd.Context(), cmd.OutOrStdout(), args[0], sandboxed.Graders(noSandbox))
			return err
		},
	}
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run code tasks' test commands without the loopback-only sandbox (they are the bank's own commands: only for a bank you trust)")
	return cmd
}
