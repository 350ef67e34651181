package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"rig/daemon"
)

func newGradeCommand() *cobra.Command {
	var req daemon.RegradeRequest
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
			return rep.WriteText(cmd.OutOrStdout())
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
func regradeStudy(cmd *cobra.Command, req daemon.RegradeRequest) (*daemon.RegradeReport, error) {
	var rep daemon.RegradeReport
	err := callDaemon(cmd.Context(), socketPath(cmd), "grade", req, &rep, cmd.ErrOrStderr())
	switch {
	case err == nil:
		return &rep, nil
	case errors.Is(err, daemon.ErrNoDaemon):
		svc, err := daemon.NewService(homeDir(cmd), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			return nil, err
		}
		defer svc.Close()
		return svc.Regrade(cmd.Context(), req)
	case errors.Is(err, daemon.ErrNoMethod):
		return nil, fmt.Errorf("the running rig daemon does not serve re-grades and holds the study's store: stop it (or restart it from this build) and run rig grade again: %w", err)
	}
	return nil, err
}
