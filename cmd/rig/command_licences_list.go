package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"rig/licences"
)

func newLicencesListCommand() *cobra.Command {
	var registry string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the licence registry's entries and their verdicts per use",
		Long: `list prints every entry of the licence registry: its id (what a design's
items name as registry_id), the item, its kind and licence, the date its terms
were read, and the verdict for each use the entry rules on. A use an entry does
not name is allowed unless providers commonly ban it; rig licences check says
which applied.

Example:
  rig licences list
  rig licences list --registry my-registry.json

Exit status 0, or 1 when the registry cannot be read or is invalid.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, err := loadRegistry(registry)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tKIND\tLICENCE\tREAD\tVERDICTS")
			for _, e := range reg.Entries {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.Kind, e.Licence, e.DateRead, verdictSummary(e))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&registry, "registry", "", "licence registry file (default: the one compiled into rig)")
	return cmd
}

func loadRegistry(path string) (*licences.Registry, error) {
	if path == "" {
		return licences.Bundled()
	}
	return licences.LoadRegistry(path)
}

// verdictSummary lists uses in the registry's own order so two entries read
// side by side.
func verdictSummary(e licences.Entry) string {
	var parts []string
	for _, u := range licences.Uses() {
		if v, ok := e.Verdicts[u]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", u, v.Verdict))
		}
	}
	var other []string
	for u, v := range e.Verdicts {
		if !slices.Contains(licences.Uses(), u) {
			other = append(other, fmt.Sprintf("%s=%s", u, v.Verdict))
		}
	}
	slices.Sort(other)
	return strings.Join(append(parts, other...), " ")
}
