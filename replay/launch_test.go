package replay

import (
	"testing"

	"rig/genrecord"
	"rig/internal/offload"
	"rig/internal/provision"
)

// TestReplayLaunchRunsTheRecordsWay: replay starts the build of the
// record's backend at the record's context, repacking, prompt cuts and card
// placement; a record that names none of them (made before rig wrote them)
// is replayed as its server then ran: CPU, 4096, repacked, cutting prompts.
func TestReplayLaunchRunsTheRecordsWay(t *testing.T) {
	model := provision.Model{Path: "/models/m.gguf", SHA256: "aa"}
	card := offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers, FlashAttention: "off"}
	for _, tc := range []struct {
		name             string
		pins             genrecord.Pins
		component        string
		context          int
		repack, checkpts bool
		onCard           bool
	}{
		{"older record", genrecord.Pins{ModelName: "m"}, "llama-server", genrecord.DefaultContext, true, true, false},
		{"rig's CPU default", genrecord.Pins{ModelName: "m", Context: 8192, WeightRepack: "off", PromptCheckpoints: "off"}, "llama-server", 8192, false, false, false},
		{"on the card", genrecord.Pins{ModelName: "m", Context: 2048, WeightRepack: "off", PromptCheckpoints: "off", Offload: &card}, offload.ComponentLlamaServerCUDA, 2048, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			component, cfg := replayLaunch(tc.pins, "llama-server", model, "/work", false)
			if component != tc.component || cfg.Context != tc.context || cfg.WeightRepack != tc.repack || cfg.PromptCheckpoints != tc.checkpts || cfg.Offload.OnCard() != tc.onCard {
				t.Errorf("%s: component %s, context %d, repack %v, checkpoints %v, on card %v; want %s, %d, %v, %v, %v",
					tc.name, component, cfg.Context, cfg.WeightRepack, cfg.PromptCheckpoints, cfg.Offload.OnCard(), tc.component, tc.context, tc.repack, tc.checkpts, tc.onCard)
			}
			if tc.onCard && cfg.Offload != card {
				t.Errorf("offload %+v, the record held %+v", cfg.Offload, card)
			}
			if cfg.Model != model.Path || cfg.ModelSHA256 != model.SHA256 || cfg.ModelName != "m" {
				t.Errorf("model %s %s %s", cfg.Model, cfg.ModelSHA256, cfg.ModelName)
			}
		})
	}
}
