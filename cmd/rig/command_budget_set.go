package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"rig/api"
)

func budgetSetCommand() *cobra.Command {
	var req api.BudgetRequest
	set := &cobra.Command{
		Use:   "set --wall DURATION --energy-wh WH --why TEXT",
		Short: "Set the monthly cap (operator role)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := client(cmd).SetBudget(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "monthly budget %s and %.1f Wh, set by %s\n", b.WallTime, b.EnergyWh, b.SetBy)
			return nil
		},
	}
	set.Flags().StringVar(&req.WallTime, "wall", "", "wall time per month, a Go duration such as 200h")
	set.Flags().Float64Var(&req.EnergyWh, "energy-wh", 0, "energy per month in watt-hours")
	set.Flags().StringVar(&req.Why, "why", "", "why, in words")
	set.Flags().StringVar(&req.Actor, "actor", "", "optional: must be you")
	return set
}
