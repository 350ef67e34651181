package main

import (
	"strings"
	"testing"
)

// Flag errors are reported before any runtime starts.
func TestReplayCalibrateFlags(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"replay", "calibrate"}, "--out is required"},
		{[]string{"replay", "calibrate", "--out", "x.json", "--runtime", "vllm"}, "want llama-server, ollama or both"},
		{[]string{"bench", "replay", "--runtime", "vllm"}, "want llama-server, ollama or both"},
	} {
		out, err := runRig(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("rig %s: err = %v, want %q\n%s", strings.Join(tt.args, " "), err, tt.wantErr, out)
		}
	}
}
