package main

import (
	"slices"
	"testing"

	"rig/internal/provision"
)

// bench preflight refuses a device it does not know naming the two it
// does, on a machine where setup never ran too (an empty cache here).
func TestBenchPreflightRefusesAnUnknownDevice(t *testing.T) {
	t.Setenv("RIG_CACHE", t.TempDir())
	_, err := runRig(t, "bench", "preflight", "--device", "gpu")
	if want := `--device "gpu": use cpu (memory cgroups on this host) or cuda (a real card, through NVML)`; err == nil || err.Error() != want {
		t.Errorf("bench preflight --device gpu = %v; want %q", err, want)
	}
}

// With --other-quants every provisioned file is measured, each named with
// its quant so that its rows stay apart; a model with no file is left out.
// Without it, nil: every provisioned model, as the bench chooses them.
func TestBenchModels(t *testing.T) {
	in := provision.Installed{
		Models: map[string]provision.Model{
			"smollm2-135m-instruct": {Name: "smollm2-135m-instruct", Path: "/c/smol-q4_1.gguf", Quant: "Q4_1"},
			"gemma-3-270m":          {Name: "gemma-3-270m", Path: "/c/gemma-q4_k_m.gguf", Quant: "Q4_K_M"},
		},
		OtherQuants: map[string]provision.Model{
			"smollm2-135m-instruct": {Name: "smollm2-135m-instruct", Path: "/c/smol-q8_0.gguf", Quant: "Q8_0"},
			"gemma-3-270m":          {Name: "gemma-3-270m", Quant: "Q8_0"}, // not requantized here
		},
	}
	if got := benchModels(in, false); got != nil {
		t.Errorf("benchModels without other quants = %v, want nil", got)
	}
	var names []string
	for _, m := range benchModels(in, true) {
		names = append(names, m.Name)
	}
	if want := []string{"gemma-3-270m-q4_k_m", "smollm2-135m-instruct-q4_1", "smollm2-135m-instruct-q8_0"}; !slices.Equal(names, want) {
		t.Errorf("benchModels with other quants = %v, want %v", names, want)
	}
}
