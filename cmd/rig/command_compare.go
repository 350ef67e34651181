package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"rig/internal/atomicfile"
	"rig/interop/harnesslog"
)

func newCompareCommand() *cobra.Command {
	var from, out string
	cmd := &cobra.Command{
		Use:   "compare --from lm-eval|inspect|promptfoo A [B]",
		Short: "Paired analysis of two other harnesses' per-sample logs of the same tasks",
		Long: `compare reads two per-sample logs of the same tasks that another harness
wrote, pairs them item by item, and gives rig's paired analysis of every
task × metric both logs share: each side's mean with its interval (Wilson's,
for a pass rate), the paired difference with Tango's interval, the exact
McNemar test (a sign-flip test for scores), Holm's correction across all the
task × metric rows, P(best), and the smallest difference the pairs detect at
80% power. B is compared against A.

It is imported evidence, and says so: rig ran nothing, so there are no
receipts, nothing to replay and no decision to record. A metric whose values
leave [0, 1] is left out and named.

  lm-eval    A and B: a samples_TASK_DATE.jsonl of lm_eval --log_samples, or
             the --output_path folder of one run (every task in it)
  inspect    A and B: two Inspect eval logs (.eval or .json), paired by
             sample id and epoch
  promptfoo  A: the file promptfoo eval --output FILE.json wrote, with two
             providers; or A and B, one provider each

Examples:
  rig compare --from lm-eval out/q4/samples_arith_2026-12-06T10-00-00.jsonl out/q8/samples_arith_2026-12-06T10-05-00.jsonl
  rig compare --from lm-eval out/q4 out/q8          every task of each run's --output_path
  rig compare --from inspect logs/small.eval logs/large.eval --out compare.json
  rig compare --from promptfoo output.json

Exit status 0 when the comparison is printed (whatever it finds); 1 when a log
cannot be read (the message names the file, the line and the field) or the two
share no paired item.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := harnesslog.ParseFormat(from)
			if err != nil {
				return err
			}
			a, b, err := comparedLogs(format, args)
			if err != nil {
				return err
			}
			c, err := harnesslog.Compare(cmd.Context(), a, b)
			if err != nil {
				return err
			}
			if out != "" {
				if err := atomicfile.WriteJSON(out, c, 0o644); err != nil {
					return err
				}
			}
			if err := c.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if out != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "written: %s\n", out)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the harness that wrote the logs: lm-eval, inspect or promptfoo")
	cmd.Flags().StringVar(&out, "out", "", "also write the comparison (with the full analysis) as JSON to this file")
	return cmd
}

// comparedLogs are the two logs the arguments name: one per file, or the
// two providers of one promptfoo output.
func comparedLogs(format harnesslog.Format, args []string) (a, b harnesslog.Log, err error) {
	var logs []harnesslog.Log
	for _, p := range args {
		ls, err := harnesslog.Read(format, p)
		if err != nil {
			return a, b, err
		}
		if len(args) == 2 && len(ls) != 1 {
			return a, b, fmt.Errorf("%s holds %d providers: pass it alone to compare two of them, or one file per provider", p, len(ls))
		}
		logs = append(logs, ls...)
	}
	if len(logs) != 2 {
		if len(args) == 1 {
			return a, b, fmt.Errorf("%s holds %d logs: compare needs two (name B as well, or a promptfoo output with two providers)", args[0], len(logs))
		}
		return a, b, fmt.Errorf("compare needs two logs, got %d", len(logs))
	}
	return logs[0], logs[1], nil
}
