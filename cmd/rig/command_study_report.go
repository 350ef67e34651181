package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"rig/api"
	"rig/report"

	"github.com/spf13/cobra"
)

func studyReportCommand() *cobra.Command {
	var opts api.ReportOptions
	var screenshot string
	cmd := &cobra.Command{
		Use:   "report NAME",
		Short: "Analyse an execution and write the HTML, JSON and Markdown report",
		Long: `report runs the pre-registered analysis on the study's latest finished execution
(or --execution): per-arm scores with bootstrap intervals over tasks, P(best),
exact McNemar on the named pairs with Holm, power, cost and outcome classes,
and the decision rule's result with its logic. It writes one self-contained
HTML file (figures as inline SVG), plus report.json and report.md, and prints
a summary and where the files are. It records nothing: rig study decide does.

A card sub-study's report carries the card table (model × profile: fits or
not, token rates, score with its interval, peak memory, wall time, energy).

  rig study report demo-small-models
  rig study report demo-small-models --replay-sample 5      replay 5 kept rows per record first
  rig study report demo-small-models --screenshot shot.png  open it in headless Chromium too

--replay-sample re-scores a seeded sample of every generation record through
its pinned runtime (see rig replay) and puts the result in the report; the
replay is kept with the execution, so later reports show it without
--replay-sample. --screenshot checks the page in a real headless browser
(every figure rendered) and saves a PNG of it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var files api.ReportFiles
			what := "analysing"
			if opts.ReplaySample > 0 {
				// The daemon answers once, at the end; say what the wait is for.
				fmt.Fprintf(cmd.OutOrStdout(), "replaying %d kept rows of every generation record through its pinned runtime first: about as long as generating them took\n", opts.ReplaySample)
				what = "replaying and analysing"
			}
			err := withHeartbeat(cmd.Context(), cmd.OutOrStdout(), socketPath(cmd), args[0], what, func(text io.Writer) error {
				var err error
				files, err = client(cmd).Report(cmd.Context(), api.ReportRequest{Name: args[0], ReportOptions: opts})
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), files.Summary)
			fmt.Fprintf(cmd.OutOrStdout(), "\nreport: %s\n        %s\n        %s\n", files.HTML, files.JSON, files.Markdown)
			if screenshot != "" {
				if err := checkInBrowser(cmd.Context(), files, screenshot); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "screenshot: %s (rendered in headless Chromium; every figure present)\n", screenshot)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Execution, "execution", "", "execution to analyse (default: the latest finished)")
	cmd.Flags().IntVar(&opts.ReplaySample, "replay-sample", 0, "replay this many kept rows of every generation record first (0: show the last replay, if any)")
	cmd.Flags().StringVar(&screenshot, "screenshot", "", "render the HTML in headless Chromium, check its figures and save a PNG here")
	return cmd
}

// checkInBrowser renders the report in headless Chromium, checks that every
// figure the data calls for is in the rendered page, and saves a screenshot.
func checkInBrowser(ctx context.Context, files api.ReportFiles, png string) error {
	bin, err := report.FindBrowser()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(files.JSON)
	if err != nil {
		return err
	}
	var data report.Data
	if err := json.Unmarshal(raw, &data); err != nil {
		return fmt.Errorf("%s: %w", files.JSON, err)
	}
	profile, removeProfile, err := report.TempProfile()
	if err != nil {
		return err
	}
	defer removeProfile()
	b := report.Browser{Bin: bin, Profile: profile}
	dom, err := b.DumpDOM(ctx, files.HTML)
	if err != nil {
		return err
	}
	if err := report.CheckFigures(dom, data); err != nil {
		return fmt.Errorf("%s in headless Chromium: %w", files.HTML, err)
	}
	if abs, err := filepath.Abs(png); err == nil {
		png = abs
	}
	return b.PageScreenshot(ctx, files.HTML, png, 1280)
}
