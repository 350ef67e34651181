package main

import (
	"github.com/spf13/cobra"
)

// addLeafCommands registers the commands that call one leaf package each
// (schema, licences, tasks, preflight, cards, governor, models). `rig study init` is
// built by newStudyInitCommand and registered by the study command group.
func addLeafCommands(root *cobra.Command) {
	schema := &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schemas of rig's files, for editors and outside tools",
	}
	schema.AddCommand(newSchemaDesignCommand(), newSchemaGenerationsCommand(), newSchemaPolicyCommand(), newSchemaBankCommand())

	lic := &cobra.Command{
		Use:   "licences",
		Short: "Check a design's items against the licence registry, or list the registry",
	}
	lic.AddCommand(newLicencesCheckCommand(), newLicencesListCommand())

	tasks := &cobra.Command{
		Use:   "tasks",
		Short: "Lint, audit and leak-check task banks; export and import blind human keying",
	}
	tasks.AddCommand(newTasksLintCommand(), newTasksAuditCommand(), newTasksLeakageCommand(),
		newTasksExportBlindCommand(), newTasksImportKeysCommand(), newTasksImportCommand())

	cards := &cobra.Command{
		Use:   "cards",
		Short: "List the real and simulated cards a study can be held to",
	}
	cards.AddCommand(newCardsListCommand())

	gov := &cobra.Command{
		Use:   "governor",
		Short: "Run the governor's fault-injection suite and read its last pass",
	}
	gov.AddCommand(newGovernorFaultsCommand(), newGovernorStatusCommand(), newGovernorSoakCommand(), newGovernorCardCommand())

	root.AddCommand(schema, lic, tasks, newPreflightCommand(), cards, gov, newModelsCommand())
	root.AddCommand(newFidelityCommand())
}
