package licences_test

import (
	"context"
	"fmt"
	"os"

	"rig/licences"
)

func ExampleRunCheck() {
	items := []licences.Item{
		{Role: licences.RoleIncumbent, Name: "SmolLM2-135M-Instruct", RegistryID: "smollm2-135m-instruct", Use: licences.UseEvaluation},
		{Role: licences.RoleCandidate, Name: "Gemma-3-270M", RegistryID: "gemma-3-270m", Use: licences.UseTrainingOnOutputs},
		{Role: licences.RoleWriter, Name: "Muse-Glimmer-30B", RegistryID: "muse-glimmer-30b-card", Use: licences.UseInference},
	}
	err := licences.RunCheck(context.Background(), os.Stdout, "", items)
	fmt.Println(err != nil)
	// Output:
	// incumbent: SmolLM2-135M-Instruct (smollm2-135m-instruct, evaluation: allowed) from licences/registry.json (bundled with rig)
	// candidate: Gemma-3-270M (gemma-3-270m, training_on_outputs: restricted) from licences/registry.json (bundled with rig)
	// BLOCKED writer: Muse-Glimmer-30B (muse-glimmer-30b-card, inference): no entry "muse-glimmer-30b-card" in licences/registry.json (bundled with rig) (after reading the terms at the source, add an entry with id "muse-glimmer-30b-card" to a studio licence registry (a file {"schema_version": 1, "entries": [...]} with only the studio's entries; the bundled ones still apply) named by --registry FILE, licence_registry in the design, or $RIG_LICENCE_REGISTRY)
	// true
}
