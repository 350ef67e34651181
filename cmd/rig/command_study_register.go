package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"rig/api"
	"rig/studies"

	"github.com/spf13/cobra"
)

func studyRegisterCommand() *cobra.Command {
	var key, actor, registry, name, fromTry string
	var pilotFromTry bool
	cmd := &cobra.Command{
		Use:   "register DESIGN",
		Short: "Register a study from its design file (licences checked first)",
		Long: `register reads the design (JSON or YAML), checks every item against the licence
registry (a missing entry, a banned use, or a commonly banned use without a
clause reading blocks it), fingerprints every pinned asset, and creates the
study's own store. Nothing is written when a check fails.

The design is read by this command, with your rights, and sent to the daemon;
the task banks, licence registry and model files it names are read by the
daemon only if you could read them yourself (or they lie in the daemon's home
or the provisioned cache).

An arm's model.ollama_tag is resolved here too, in your own Ollama library
($OLLAMA_MODELS, else ~/.ollama/models), to its GGUF blob and digest, which
the daemon pins like any model file (rig models list shows the tags).

The licence registry is chosen as rig licences check chooses it: --registry
FILE, else the design's licence_registry, else $RIG_LICENCE_REGISTRY (as set
for this command, not for the daemon), else the bundled registry alone; a
studio file is read over the bundled one. Its hash is recorded, and freeze
refuses the study if the file changes.

A study's name is the design's name, or --name: a registered study's design
and inputs never change, so a changed design (or a changed task bank) goes
again under a new name; withdraw the old study with rig study withdraw.

Registering the same design with the same inputs twice returns the existing
study. --key makes that explicit: the same key with the same design returns
the existing study; the same key with another design is a conflict.

--from-try ID registers exactly what a try ran (rig try): the design must
hash as it did in the try, and every digest the try recorded (banks, models,
runtime builds, licence registries) is the expected one; one that changed
since is refused as stale_asset, naming it with both digests. With
--pilot-from-try, the design's power.pilot_discordance is taken from the
try (the largest pair's discordance) and the registration records it as
such, with the try's id.

  rig study register design.json
  rig study register design.json --from-try try-0123456789ab --pilot-from-try`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			// The design is read here, with your rights, and sent: the daemon
			// (often root) never reads a file for you that you could not.
			design, err := studies.ReadDesignFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("read design: %w (rig study init %s writes a commented example to edit)", err, args[0])
			}
			if err != nil {
				return fmt.Errorf("read design: %w", err)
			}
			req := api.RegisterRequest{DesignFile: path, Design: design, Key: key, Actor: actor, Name: name, FromTry: fromTry, PilotFromTry: pilotFromTry}
			// An arm's model.ollama_tag is resolved here, in your own library.
			if req.OllamaTags, err = resolveOllamaTags(path, design); err != nil {
				return err
			}
			// The daemon may run elsewhere with another working directory and
			// environment: it gets absolute paths, and this shell's setting.
			if req.Registry, err = absOrEmpty(registry); err != nil {
				return err
			}
			if req.ConfiguredRegistry, err = absOrEmpty(os.Getenv(studies.LicenceRegistryEnv)); err != nil {
				return err
			}
			info, err := client(cmd).Register(cmd.Context(), req)
			if err != nil {
				return err
			}
			printStudy(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "idempotency key")
	cmd.Flags().StringVar(&fromTry, "from-try", "", "register exactly what this try ran (rig try list): a digest that changed since is stale_asset")
	cmd.Flags().BoolVar(&pilotFromTry, "pilot-from-try", false, "with --from-try: take power.pilot_discordance from the try, recorded as such")
	cmd.Flags().StringVar(&name, "name", "", "the study's name, in place of the design's name (to register a changed design again under a new name)")
	cmd.Flags().StringVar(&actor, "actor", "", "optional: must be you (rig records the caller's identity)")
	cmd.Flags().StringVar(&registry, "registry", "", "the studio's licence registry file, read over the bundled one (default: the design's licence_registry, else $"+studies.LicenceRegistryEnv+", else the bundled registry alone)")
	return cmd
}

func absOrEmpty(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	return filepath.Abs(p)
}
