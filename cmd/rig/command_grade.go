package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"rig/api"
	"rig/daemon"
)

func newGradeCommand() *cobra.Command {
	var req api.RegradeRequest
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "grade --regrade STUDY [--grader NAME --version N] [--execution ID]",
		Short: "Re-grade a study's stored outputs with another grader version, beside the old grades",
		Long: `grade --regrade reads the outputs a study's execution kept (the generation
records), grades them again with another version of their task graders, and
stores the new grades beside the old ones: receipts and earlier grades are never
touched. It prints the old and the new grade of every trial and how many changed.

  rig grade --regrade my-study                          every trial, each grader's newest version
  rig grade --regrade my-study --grader json --version 2
  rig grade --regrade my-study --execution exec-2 --json

An unknown grader or version is refused before anything is written. Code trials
(Aider) cannot be re-graded: the repository a trial left is not kept, only its
model calls. A judge's grades come from running the judge arm again, in a new
execution.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.Study == "" {
				return errors.New("name the study: rig grade --regrade STUDY")
			}
			rep, err := regradeStudy(cmd, req)
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			}
			return printRegrade(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().StringVar(&req.Study, "regrade", "", "the study whose stored outputs are re-graded")
	cmd.Flags().StringVar(&req.Grader, "grader", "", "re-grade only trials whose task grader has this name (default: every trial, with its own grader)")
	cmd.Flags().IntVar(&req.Version, "version", 0, "the grader version to grade with (default: the newest registered)")
	cmd.Flags().StringVar(&req.Execution, "execution", "", "the execution to re-grade (default: the latest finished)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	return cmd
}

// regradeStudy asks the daemon, which holds the study's store open; with no
// daemon running it opens the store itself.
func regradeStudy(cmd *cobra.Command, req api.RegradeRequest) (api.RegradeReport, error) {
	rep, err := client(cmd).Regrade(cmd.Context(), req)
	switch {
	case errors.Is(err, api.ErrNoDaemon):
		return daemon.RegradeWithoutDaemon(cmd.Context(), homeDir(cmd), req)
	case errors.Is(err, api.ErrNoMethod):
		return rep, fmt.Errorf("the running rig daemon does not serve re-grades and holds the study's store: stop it (or restart it from this build) and run rig grade again: %w", err)
	}
	return rep, err
}

// printRegrade prints the per-trial comparison of old and new grades and
// the totals.
func printRegrade(w io.Writer, r api.RegradeReport) error {
	fmt.Fprintf(w, "study %s, execution %s\n", r.Study, r.Execution)
	fmt.Fprintf(w, "%-14s %-22s %-28s %3s  %-20s %-20s %s\n", "job kind", "task", "arm", "rep", "old", "new", "")
	for _, row := range r.Rows {
		mark := ""
		if row.Changed {
			mark = "changed"
		}
		if row.AlreadyHad {
			mark = strings.TrimSpace(mark + " (stored earlier)")
		}
		fmt.Fprintf(w, "%-14s %-22s %-28s %3d  %-20s %-20s %s\n", row.JobKind, row.Task, row.Arm, row.Repeat,
			gradeCell(row.OldGrader, row.OldScore, row.OldPass), gradeCell(row.NewGrader, row.NewScore, row.NewPass), mark)
	}
	for _, s := range r.Skipped {
		fmt.Fprintln(w, "skipped:", s)
	}
	_, err := fmt.Fprintf(w, "%d trials re-graded, %d changed, %d new grades stored beside the old ones (old grades untouched)\n", len(r.Rows), r.Changed, r.Written)
	return err
}

func gradeCell(grader string, score float64, pass bool) string {
	p := "fail"
	if pass {
		p = "pass"
	}
	return fmt.Sprintf("%s %.2f %s", grader, score, p)
}
