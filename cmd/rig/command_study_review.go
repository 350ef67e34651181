package main

import (
	"fmt"
	"rig/api"
	"strings"

	"github.com/spf13/cobra"
)

func studyReviewCommand() *cobra.Command {
	var r api.Review
	var why string
	cmd := &cobra.Command{
		Use:   "review NAME",
		Short: "Record an outside review's verdict (a pass needs a licence line naming the licences)",
		Long: `review first prints the licence terms the study rests on (each registry
entry's licence, the page its terms were read from, the clause, what it allows
per use and the uses this study puts it to, restricted ones marked), then
records the verdict. A pass needs --licence-line, the reviewer's statement on
the licence check, and it must name every restricted entry (by its id or its
licence's name), or at least one entry when none is restricted.

  rig study review demo --verdict pass \
    --licence-line "licences: smollm2-135m-instruct (Apache-2.0) and the rest checked against registry.json, no banned or restricted use"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The terms first: a reviewer writes the licence line having
			// seen what each licence allows and restricts.
			now, err := client(cmd).Status(cmd.Context(), api.NameRequest{Name: args[0]})
			if err != nil {
				return err
			}
			printLicenceTerms(cmd.OutOrStdout(), args[0], now.LicenceTerms)
			// And the rule's fate: a reviewer passes the design knowing it.
			printWarnings(cmd.OutOrStdout(), now.Warnings)
			if r.Verdict == "pass" && strings.TrimSpace(r.LicenceLine) == "" {
				return fmt.Errorf("a pass needs --licence-line: your statement on the licence check, naming the licences above (nothing was recorded)")
			}
			fmt.Fprintln(cmd.OutOrStdout())
			info, err := client(cmd).Review(cmd.Context(), api.ReviewRequest{Name: args[0], Review: r, Why: why})
			if err != nil {
				return err
			}
			printStudy(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().StringVar(&r.Reviewer, "reviewer", "", "optional, for readability: must be you (rig records the caller's identity)")
	cmd.Flags().StringVar(&r.Verdict, "verdict", "", "pass or fail (required)")
	cmd.Flags().StringVar(&r.LicenceLine, "licence-line", "", "the reviewer's statement on the licence check; a pass without one does not count")
	cmd.Flags().StringVar(&r.Notes, "notes", "", "the review's notes")
	cmd.Flags().StringVar(&why, "why", "", "why, for the audit log")
	return cmd
}
