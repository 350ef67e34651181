package main

import (
	"bytes"
	"fmt"

	"github.com/spf13/cobra"

	"rig/api"
	"rig/internal/layout"
	"rig/interop/inspectlog"
)

func newExportCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "export", Short: "Write a study's executions in other tools' formats"}
	cmd.AddCommand(newExportInspectCommand())
	return cmd
}

func newExportInspectCommand() *cobra.Command {
	var execution, out string
	cmd := &cobra.Command{
		Use:   "inspect NAME --out DIR",
		Short: "Write an execution as Inspect AI eval logs, one per arm × job kind",
		Long: `inspect writes one Inspect AI eval log (.eval) per arm × job kind of an
execution, which Inspect's viewer (inspect view), its log reader
(inspect_ai.log.read_eval_log) and its dataframes open:

  task        the job kind; the dataset is the frozen bank (its name, and its
              content hash as the location); the revision is the design hash
  model       RUNTIME/REGISTRY-NAME, every pin and the model digest as model
              arguments, the sampling as the generate config
  samples     one per trial: the task id, the repeat as the epoch, the
              rendered prompt as input, the key as target, the output with
              its top-K log-probabilities per step, the grade as a score
              (grader name and version in its metadata), token usage, wall
              time, and the receipt (trial key, attempt, outcome, digests)
              as metadata
  results     the ranking measure: the mean over samples and over tasks, and
              for a pass rate the interval rig's analysis gives it

A preempted or error attempt is the sample's error (or one of its
error_retries when a later attempt scored), never a score. The receipts come
from the daemon; the snapshot, banks and generation records from the study's
folder under --home. The same execution gives the same bytes; each file is
written whole and renamed into place.

Examples:
  rig export inspect quick-small-models --out logs/
  rig export inspect quick-small-models --execution exec-2 --out logs/
  inspect view --log-dir logs/          (Inspect's own viewer, if installed)

Exit status 0 when every log is written; 1 when the study has no receipts of
the execution, its snapshot or a bank does not match what was frozen, or the
daemon cannot be reached.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out: name the folder to write the logs into")
			}
			study, err := layout.Home(homeDir(cmd)).Study(args[0])
			if err != nil {
				return err
			}
			var rs bytes.Buffer
			if err := client(cmd).Export(cmd.Context(), api.NameRequest{Name: args[0], Format: "jsonl"}, &rs); err != nil {
				return err
			}
			x, err := inspectlog.Load(study, execution, &rs)
			if err != nil {
				return err
			}
			logs, err := inspectlog.Build(x)
			if err != nil {
				return err
			}
			paths, err := inspectlog.Write(out, logs)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "execution %s of %s: %d Inspect eval logs\n", x.ID, x.Study, len(paths))
			for i, p := range paths {
				fmt.Fprintf(w, "  %s  (%s, %s: %d samples)\n", p, logs[i].Eval.Task, logs[i].Eval.Model, len(logs[i].Samples))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&execution, "execution", "", "the execution to export (default: the latest)")
	cmd.Flags().StringVar(&out, "out", "", "the folder the .eval files are written into")
	return cmd
}
