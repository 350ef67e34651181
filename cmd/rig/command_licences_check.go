package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

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

The registry is the one compiled into rig (licences/registry.json) unless
--registry names another. Model file references such as ${SMOLLM2_GGUF} are
expanded from the installed.env that make setup writes, then the environment.

Example:
  rig licences check examples/demo-study/design.json

Exit status 0 when every item may be put to its use, 1 when an item is
blocked, the design is invalid or a file cannot be read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			items, err := designItems(cmd, args[0], envFile)
			if err != nil {
				return err
			}
			return licences.RunCheck(cmd.Context(), cmd.OutOrStdout(), registry, items)
		},
	}
	cmd.Flags().StringVar(&registry, "registry", "", "licence registry file (default: the one compiled into rig)")
	cmd.Flags().StringVar(&envFile, "installed-env", installedEnvPath(), "env file that expands ${NAME} in model files (skipped when absent)")
	return cmd
}

// designItems loads and validates the design and returns its item list in
// the licences package's terms.
func designItems(cmd *cobra.Command, path, envFile string) ([]licences.Item, error) {
	lookup, err := studies.EnvFileLookup(envFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		lookup = os.LookupEnv
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w (fix the line, or pass --installed-env)", envFile, err)
	}
	d, err := studies.LoadDesign(cmd.Context(), path, studies.ValidateOptions{File: path, Lookup: lookup})
	if err != nil {
		return nil, err
	}
	items := make([]licences.Item, len(d.Items))
	for i, it := range d.Items {
		items[i] = licences.Item{Role: licences.Role(it.Role), Name: it.Name, RegistryID: it.RegistryID, Use: licences.Use(it.Use)}
	}
	return items, nil
}
