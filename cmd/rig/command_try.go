package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rig/api"
	"rig/internal/wording"
	"rig/studies"
)

func newTryCommand() *cobra.Command {
	var tasks int
	var task, arms []string
	var registry, actor string
	var full bool
	cmd := &cobra.Command{
		Use:   "try DESIGN",
		Short: "Run a draft design's arms on a few tasks now, side by side, nothing counted",
		Long: `try runs the arms of a draft design on a few of its tasks right away: no review,
approval or freeze, no study store, nothing counted. The trials run as a
study's do (the same sandbox, runtimes and governor), and the licence check
applies: a missing or restricting registry entry blocks a try as it blocks
register. A bank need not be audited yet.

For each task it prints the prompt and every arm's output, grade, tokens and
latency side by side; then the pilot figures the design's power section
needs (per pair the discordance and its interval, and the smallest lead the
planned tasks detect with it; per arm the capped and off-task shares), and
says plainly when an arm passes nothing or when the decision rule can only
ever say one thing.

By default it tries 3 tasks of each job kind, taken template by template,
the same ones on every try of the design, never a hold-out task. The
daemon keeps the runtimes up for a few minutes after a try
(` + "$RIG_TRY_KEEP_WARM" + ` for the daemon, default 5m), so a second try after an
edit of a prompt, a stop cap or a bank answers in seconds; a change of a
runtime's pins (model, context, slots, offload, build) starts a new one.

Each try is kept under its own id (the design's hash and the digests of
its banks, models, runtime builds, and the outputs) until pruned;
rig study register DESIGN --from-try ID registers exactly what was tried.

rig ui shows each try as a matrix of tasks by arms (each cell the arm's
output, grade, tokens and latency, the pilot figures beneath), filling in as
trials end while the try runs.

A job kind graded by a judge arm is graded in a try as in a study: once
the arms have answered, the judge arm grades each task's answers blind, and
its grade is the one shown (marked judge:ARM).

  rig try examples/quick-study/design.json
  rig try design.json --tasks 8 --arm few-shot --arm chat
  rig try design.json --task cap-france --task cap-japan
  rig try list
  rig try prune --older-than 24h`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := tryRequest(args[0], registry)
			if err != nil {
				return err
			}
			req.Tasks, req.Task, req.Arms, req.Actor = tasks, task, arms, actor
			rec, err := client(cmd).Try(cmd.Context(), req)
			if err != nil {
				return err
			}
			printTry(cmd.OutOrStdout(), rec, args[0], full)
			return nil
		},
	}
	cmd.Flags().IntVar(&tasks, "tasks", 0, "tasks of each job kind to try (default 3)")
	cmd.Flags().StringArrayVar(&task, "task", nil, "a task id to try (repeat for several); in place of --tasks")
	cmd.Flags().StringArrayVar(&arms, "arm", nil, "an arm to try (repeat for several; default every arm)")
	cmd.Flags().StringVar(&registry, "registry", "", "the studio's licence registry file, as for rig study register")
	cmd.Flags().StringVar(&actor, "actor", "", "optional: must be you (rig records the caller's identity)")
	cmd.Flags().BoolVar(&full, "full", false, "print whole prompts and outputs, not their first 160 characters")
	cmd.MarkFlagsMutuallyExclusive("tasks", "task")
	cmd.AddCommand(newTryListCommand(), newTryPruneCommand())
	return cmd
}

// tryRequest reads the design with the caller's rights, as register does.
func tryRequest(file, registry string) (api.TryRequest, error) {
	path, err := filepath.Abs(file)
	if err != nil {
		return api.TryRequest{}, err
	}
	design, err := studies.ReadDesignFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return api.TryRequest{}, fmt.Errorf("read design: %w (rig study init %s writes a commented example to edit)", err, file)
	}
	if err != nil {
		return api.TryRequest{}, fmt.Errorf("read design: %w", err)
	}
	req := api.TryRequest{DesignFile: path, Design: design}
	if req.Registry, err = absOrEmpty(registry); err != nil {
		return req, err
	}
	if req.ConfiguredRegistry, err = absOrEmpty(os.Getenv(studies.LicenceRegistryEnv)); err != nil {
		return req, err
	}
	return req, nil
}

func newTryListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the kept tries, newest first",
		Long: `list shows every kept try: its id, when it ran, the design's name and hash,
and how many of its trials passed.

  rig try list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tries, err := client(cmd).Tries(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(tries) == 0 {
				fmt.Fprintln(w, "no tries kept (rig try DESIGN makes one)")
			}
			for _, t := range tries {
				fmt.Fprintf(w, "%s  %s  %-28s design %s  %d/%d passed\n", t.ID, t.At.Local().Format(time.DateTime), t.Study, studies.Short(t.DesignHash), t.Passed, t.Trials)
			}
			return nil
		},
	}
}

func newTryPruneCommand() *cobra.Command {
	var olderThan time.Duration
	var all bool
	cmd := &cobra.Command{
		Use:   "prune [ID]",
		Short: "Remove kept tries: one by id, those older than a duration, or all",
		Long: `prune removes kept tries and their records. A study registered --from-try
keeps what it needs in its own registration, so pruning never touches a study.

  rig try prune try-0123456789ab
  rig try prune --older-than 24h
  rig try prune --all`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.TryPruneRequest{OlderThan: olderThan, All: all}
			if len(args) == 1 {
				req.ID = args[0]
			}
			removed, err := client(cmd).PruneTries(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d tries\n", len(removed))
			for _, id := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "  "+id)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "remove the tries older than this (e.g. 24h)")
	cmd.Flags().BoolVar(&all, "all", false, "remove every kept try")
	return cmd
}

// printTry prints a try: each task's prompt with every arm's answer beside
// the others, the runtimes, the pilot figures and what they say.
func printTry(w io.Writer, rec api.TryRecord, file string, full bool) {
	clip := func(s string) string {
		s = strings.TrimSpace(s)
		if !full {
			s = strings.Join(strings.Fields(s), " ")
			if r := []rune(s); len(r) > 160 {
				s = string(r[:160]) + "…"
			}
		}
		return s
	}
	last := ""
	for _, t := range rec.Trials {
		if k := t.JobKind + "/" + t.Task; k != last {
			last = k
			fmt.Fprintf(w, "\n== %s\nprompt  %s\n", k, clip(t.Prompt))
		}
		grade := t.Outcome
		if t.Graded {
			grade = fmt.Sprintf("fail %.2f", t.Score)
			if t.Pass {
				grade = fmt.Sprintf("pass %.2f", t.Score)
			}
		}
		flags := ""
		if t.Grader != "" {
			flags += " graded by " + t.Grader
		}
		if t.Capped {
			flags += " capped"
		}
		if t.OffTask != "" {
			flags += " off task (" + t.OffTask + ")"
		}
		fmt.Fprintf(w, "  %-28s %-9s %5d→%-4d tok %6.2fs%s\n", t.Arm, grade, t.InputTokens, t.OutputTokens, float64(t.WallMS)/1000, flags)
		if out := clip(t.Output); out != "" {
			fmt.Fprintf(w, "      %s\n", out)
		}
		if t.Detail != "" && (!t.Graded || t.Outcome != "scored" && t.Outcome != "capped") {
			fmt.Fprintf(w, "      (%s)\n", clip(t.Detail))
		}
	}
	fmt.Fprintln(w, "\nruntimes")
	for _, r := range rec.Runtimes {
		how := fmt.Sprintf("started in %.1fs", float64(r.ReadyMS)/1000)
		if r.Reused {
			how = "warm, kept from an earlier try"
		}
		fmt.Fprintf(w, "  %-28s %-13s pid %-7d %s (build %s)\n", r.Arm, r.Runtime, r.PID, how, studies.Short(r.Build))
	}
	printPilot(w, rec)
	fmt.Fprintf(w, "\ntry %s took %.1fs; kept in %s (nothing counted)\n", rec.ID, float64(rec.ElapsedMS)/1000, rec.Dir)
	if rec.KeepWarm > 0 {
		fmt.Fprintf(w, "its runtimes stay up %s for the next try\n", rec.KeepWarm)
	}
	fmt.Fprintf(w, "register exactly this: rig study register %s --from-try %s\n", file, rec.ID)
}

// printPilot prints the try's pilot figures and its plain sentences.
func printPilot(w io.Writer, rec api.TryRecord) {
	fmt.Fprintln(w, "\npilot (a try's few tasks: figures to size the study with, not results)")
	for _, a := range rec.Pilot.Arms {
		if a.Trials == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-28s passed %d/%d, capped %s, off task %s\n", a.Arm, a.Passed, a.Trials,
			wording.Percent(float64(a.Capped)/float64(a.Trials)), wording.Percent(float64(a.OffTask)/float64(a.Trials)))
	}
	for _, p := range rec.Pilot.Pairs {
		fmt.Fprintf(w, "  %s vs %s in %s: discordance %s over %d tasks (%d split)", p.Candidate, p.Baseline, p.JobKind,
			wording.Interval(p.Discordance, p.Lo, p.Hi), p.Tasks, p.Discordant)
		if p.Detectable {
			fmt.Fprintf(w, "; the planned %d tasks detect a lead of %s at power %.2f", p.PlannedTasks, wording.Value(p.MinDetectable), p.Power)
		}
		fmt.Fprintln(w)
	}
	for _, n := range rec.Pilot.Notes {
		fmt.Fprintln(w, "  note: "+n)
	}
}
