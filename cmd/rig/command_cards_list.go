package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"rig/preflight"
)

func newCardsListCommand() *cobra.Command {
	var simulated []string
	var cardsFile string
	var context int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the real cards NVML finds and the declared simulated ones",
		Long: `list prints every NVIDIA card NVML finds (total, free and used memory, and
the processes using it), or says plainly that none was found and only
simulated cards can be used on this machine. It then prints the declared
simulated cards: from --cards (a JSON card list) and from --simulated (card
sizes, each declared at --context with an f16 KV cache and every layer on the
card). A simulated card is enforced as a memory reservation: it reproduces what
fits, not a smaller card's bandwidth or compute.

Example:
  rig cards list --simulated 8GiB,12GiB,24GiB
  rig cards list --cards cards.json

The card list file looks like:
  {"cards": [{"name": "sim-8g", "card_memory": "8GiB", "context": 8192, "simulated": true}]}

Exit status 0; 1 when a size or the card list is invalid or NVML fails
other than by being absent.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var declared []preflight.Profile
			if cardsFile != "" {
				ps, err := preflight.LoadCards(cardsFile)
				if err != nil {
					return err
				}
				declared = append(declared, ps...)
			}
			for _, s := range simulated {
				s = strings.TrimSpace(s)
				if s == "" {
					continue
				}
				p, err := preflight.ParseProfile(fmt.Sprintf("card=%s,ctx=%d", s, context))
				if err != nil {
					return fmt.Errorf("--simulated %q: %w", s, err)
				}
				declared = append(declared, p)
			}
			return preflight.ListCards(cmd.Context(), cmd.OutOrStdout(), declared)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&simulated, "simulated", nil, "simulated card sizes to declare, e.g. 8GiB,12GiB,24GiB")
	f.StringVar(&cardsFile, "cards", "", "JSON card list to declare")
	f.IntVar(&context, "context", 8192, "context length of the --simulated cards")
	return cmd
}
