package main

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"rig/tasks"
	"rig/tasks/sandboxed"
)

func newTasksAuditCommand() *cobra.Command {
	var dir string
	var noSandbox bool
	cmd := &cobra.Command{
		Use:   "audit BANK",
		Short: "Run every key through its grader and freeze the bank's hash",
		Long: `audit runs every task's key through the task's grader: each key must pass
itself, and for a code task the unfixed repository must fail its tests (a task
that passes unfixed measures nothing). When all pass it writes
AUDITDIR/audit-<bank hash>.json, a record that freezes the bank's content hash.
A study's freeze refuses a bank with no audit record, or one edited since.
Any failure writes nothing and lists every failing task.

The audit directory defaults to "audits" beside the bank file; records are
named by hash, so several banks may share one directory.

Example:
  rig tasks audit tasks/banks/extract-json.jsonl

Exit status 0 when every key passed and the record was written; 1 when a key
failed, the bank does not parse or the record cannot be written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				dir = defaultAuditDir(args[0])
			}
			_, err := tasks.RunAudit(cmd.Context(), cmd.OutOrStdout(), args[0], dir, sandboxed.Graders(noSandbox))
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "audit-dir", "", `where audit records go (default: "audits" beside the bank)`)
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run code tasks' test commands without the loopback-only sandbox (they are the bank's own commands: only for a bank you trust)")
	return cmd
}

// defaultAuditDir is where `rig tasks audit` writes a bank's record when no
// --audit-dir is given, and so where a freeze should look for it.
func defaultAuditDir(bank string) string {
	return filepath.Join(filepath.Dir(bank), "audits")
}
