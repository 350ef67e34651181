package replay

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/offload"
	"rig/internal/provision"
	"rig/runtimes"
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

// TestReplayAtTheRecordsContext: a call longer than the 4096 tokens replay
// used to run at, made by an arm pinned to 8192 (as the demo's Aider arms
// are), replays exactly, because the record says its context and replay
// runs at it.
func TestReplayAtTheRecordsContext(t *testing.T) {
	in := replayProvisioned(t)
	m := in.Models[goalModel]
	ctx := context.Background()
	work := t.TempDir()
	rt, err := runtimes.Launch(ctx, in, "llama-server", runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256,
		Context: 8192, WorkDir: filepath.Join(work, "gen")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	prompt := "Summarise this log in one line.\n" + strings.Repeat("12:00 worker 7 finished job 31 in 4.2 s; queue depth 3.\n", 230)
	msgs := []runtimes.Message{{Role: "user", Content: prompt}}
	res, err := rt.Generate(ctx, runtimes.Request{CallID: "long", Messages: msgs, MaxTokens: 6, TopK: genrecord.DefaultK})
	if err != nil {
		t.Fatal(err)
	}
	pins := callrow.Pins(rt.Pins(), replayDesignHash, "", "")
	row := callrow.Row("long", m.Name, genrecord.RoleCandidate, genrecord.Sampling{MaxTokens: 6}, genrecord.DefaultK, res)
	rt.Stop(ctx)
	if n := len(row.PromptTokenIDs) + len(row.Output); n <= genrecord.DefaultContext || pins.Context != 8192 {
		t.Fatalf("the row has %d tokens and the record says context %d; the test needs more than %d at 8192", n, pins.Context, genrecord.DefaultContext)
	}
	rec := filepath.Join(work, "long.jsonl")
	if err := writeRecord(rec, pins, []genrecord.Row{row}); err != nil {
		t.Fatal(err)
	}
	sum, err := ReplayRecord(ctx, ReplayRequest{File: rec, WorkDir: filepath.Join(work, "replay")})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != genrecord.StatusReproduced || sum.Reproduced != 1 {
		t.Errorf("a %d-token row of an 8192-context record: %s, %d of 1 reproduced (%+v)", len(row.PromptTokenIDs)+len(row.Output), sum.Status, sum.Reproduced, sum.Results)
	}
}
