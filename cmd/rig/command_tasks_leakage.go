package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"rig/tasks"
)

// placeKinds are the places a design may declare, in the order help lists
// them.
func placeKinds() []string {
	return []string{tasks.PlacePrompt, tasks.PlaceSystemPrompt, tasks.PlaceToolSpec, tasks.PlaceRetrieval, tasks.PlaceTraining}
}

func newTasksLeakageCommand() *cobra.Command {
	var banks, places []string
	cmd := &cobra.Command{
		Use:   "leakage --bank BANK... --place KIND=FILE...",
		Short: "Check that no task's input or key appears where a candidate sees or trains on it",
		Long: `leakage compares every task's whole input, each prompt paragraph, each file,
the key's values and each key file against every declared place: a prompt, a
system prompt, a tool spec, a retrieval document or a training dataset. A hit
is an exact normalized substring (parts of 6 words or more), word 8-gram
containment of 0.50 or more, or a MinHash word 5-gram Jaccard of 0.50 or more.
Each hit names both places: bank:task (part) and kind file.

KIND is one of: ` + strings.Join(placeKinds(), ", ") + `.

Example:
  rig tasks leakage --bank tasks/banks/extract-json.jsonl \
      --place system_prompt=prompts/extractor.txt --place retrieval=docs/faq.md

Exit status 0 when nothing leaks; 1 when a task leaks (the freeze refuses such
a bank), a bank does not parse or a place cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(banks) == 0 || len(places) == 0 {
				return errors.New("leakage needs at least one --bank BANK and one --place KIND=FILE")
			}
			var bs []*tasks.Bank
			for _, f := range banks {
				b, err := tasks.LoadBank(f)
				if err != nil {
					return err
				}
				bs = append(bs, b)
			}
			var ps []tasks.Place
			for _, spec := range places {
				kind, file, ok := strings.Cut(spec, "=")
				if !ok || file == "" {
					return fmt.Errorf("--place %q: want KIND=FILE, e.g. system_prompt=prompts/extractor.txt", spec)
				}
				if !slices.Contains(placeKinds(), kind) {
					return fmt.Errorf("--place %q: kind %q is not one of %s", spec, kind, strings.Join(placeKinds(), ", "))
				}
				p, err := tasks.LoadPlace(kind, file)
				if err != nil {
					return err
				}
				ps = append(ps, p)
			}
			r, err := tasks.CheckLeakage(cmd.Context(), bs, ps)
			if err != nil {
				return err
			}
			if err := r.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if len(r.Hits) > 0 {
				// The hits are printed above; the error only summarizes them.
				return fmt.Errorf("%d task leak(s) into what candidates see or train on (see above; remove the text from the place, or drop the task and bump bank_version): %w", len(r.Hits), tasks.ErrLeak)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&banks, "bank", nil, "task bank file (repeatable)")
	cmd.Flags().StringArrayVar(&places, "place", nil, "KIND=FILE a candidate sees or trains on (repeatable)")
	return cmd
}
