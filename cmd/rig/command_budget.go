package main

import (
	"github.com/spf13/cobra"
)

// newBudgetCommand builds `rig budget`: the monthly cap across studies.
func newBudgetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budget",
		Short: "Show or set the monthly wall-time and energy budget across every study on this machine",
		Long: `The monthly budget caps what every study on this machine may spend in one
calendar month (UTC): wall time and energy, counted from every receipt of
every study started that month. A run the month cannot hold (priced as the
dry run prices it) is refused, naming what is left, until the cap is raised.
rig study dry-run prints the month's budget. Setting it needs the operator role.

  rig budget show
  rig budget set --wall 200h --energy-wh 20000 --why "May's share"   (operator role)`,
	}
	cmd.AddCommand(budgetShowCommand(), budgetSetCommand())
	return cmd
}
