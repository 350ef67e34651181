package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"rig/studies"
)

// newStudyInitCommand builds `rig study init`; the study command group
// registers it.
func newStudyInitCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "init [PATH]",
		Short: "Write a commented example design to start a study from",
		Long: `init writes a commented example design (YAML) to PATH, design.yaml when PATH
is left out. Every field carries a comment saying what it pins and why; edit
it, then check it with rig licences check and register it. init never
overwrites a file: pick another PATH or move the old one away.

Paths in the design: a relative model file, job_kinds[].task_bank or
licence_registry is read from the design file's folder, whichever shell
registers it and wherever the daemon runs.

Example:
  rig study init studies/which-extractor.yaml

Exit status 0 when the file was written, 1 when PATH exists or cannot be
written.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "design.yaml"
			if len(args) == 1 {
				path = args[0]
			}
			if err := studies.InitDesign(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: edit it, then run: rig licences check %s\n", path, path)
			// The approved baseline, when a daemon answers and one was approved:
			// the incumbent the next study should start from.
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
			defer cancel()
			b, ok, err := client(cmd).Baseline(ctx)
			if err != nil || !ok {
				return nil
			}
			note := fmt.Sprintf("\n# The approved baseline (proposal %s, approved by %s): make it the incumbent arm.\n#   model.registry_name: %s\n#   model.sha256: %s\n#   runtime: %s\n#   pins: quant %s, context %d, stop_cap %d, runtime_build %q\n",
				b.ID, b.DecidedBy, b.Model.RegistryName, b.ModelSHA256, b.Runtime, b.Pins.Quant, b.Pins.Context, b.Pins.StopCap, b.Pins.RuntimeBuild)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			if _, err := f.WriteString(note); err != nil {
				f.Close()
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "the approved baseline is %s from study %s (proposal %s): noted at the end of %s\n", b.Arm, b.Study, b.ID, path)
			return f.Close()
		},
	}
}
