package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"rig/internal/provision"
	"rig/licences"
	"rig/studies"
)

func newLicencesCheckCommand() *cobra.Command {
	var registry, envFile string
	cmd := &cobra.Command{
		Use:   "check DESIGN",
		Short: "Check every item a design puts to work against the licence registry",
		Long: `check loads a design (JSON or YAML), validates it, and checks each of its items
(models, runtimes, tools, datasets, graders, judges) against the licence
registry for the use the design makes of it. It prints one line per item with
the entry and the verdict that let it through, in the form a design's review
carries ("writer: SmolLM2-135M-Instruct (smollm2-135m-instruct, inference:
allowed)"), then every item that blocks the design with what to do about it.

The registry is the studio's own file, read over the one bundled with rig
(an id in both: the studio's entry wins), chosen as rig study register chooses
it, so a check that passes here passes at register:
  --registry FILE, else the design's licence_registry (relative to the design
  file's folder), else $RIG_LICENCE_REGISTRY, else the bundled registry alone.
The first line names the registry used; each item's line names the file its
entry came from. Model file references such as ${SMOLLM2_GGUF} are expanded
from the installed.env that make setup writes, then the environment.

Example:
  rig licences check examples/demo-study/design.json
  rig licences check design.yaml --registry studio/licences.json

Exit status 0 when every item may be put to its use, 1 when an item is
blocked, the design is invalid or a file cannot be read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, lookup, err := loadDesignForLicences(cmd, args[0], envFile)
			if err != nil {
				return err
			}
			choice, err := studies.ChooseLicenceRegistry(registry, d, args[0], os.Getenv(studies.LicenceRegistryEnv), lookup)
			if err != nil {
				return err
			}
			lic, err := studies.OpenLicences(choice)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), lic.Describe())
			return licences.WriteCheck(cmd.OutOrStdout(), lic.Result(d.Items))
		},
	}
	cmd.Flags().StringVar(&registry, "registry", "", "the studio's licence registry file, read over the bundled one (default: the design's licence_registry, else $"+studies.LicenceRegistryEnv+", else the bundled registry alone)")
	cmd.Flags().StringVar(&envFile, "installed-env", provision.Path(), "env file that expands ${NAME} in model files (skipped when absent)")
	return cmd
}

// loadDesignForLicences loads and validates the design, with the lookup that
// expands its ${NAME} references.
func loadDesignForLicences(cmd *cobra.Command, path, envFile string) (*studies.Design, func(string) (string, bool), error) {
	lookup, err := provision.LookupFile(envFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (fix the line, or pass --installed-env)", err)
	}
	d, err := studies.LoadDesign(cmd.Context(), path, studies.ValidateOptions{File: path, Lookup: lookup})
	if err != nil {
		return nil, nil, err
	}
	return d, lookup, nil
}
