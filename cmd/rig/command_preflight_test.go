package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/gguf"
	"rig/preflight"
)

func TestPreflight(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.WriteTiny(model, gguf.TinyOptions{Seed: 5}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		wantOut string
	}{
		{name: "fits a large card", args: []string{"--profile", "8GiB"}, wantOut: "verdict: fits"},
		{name: "full profile form", args: []string{"--profile", "card=8GiB,ctx=2048,kv=q8_0"}, wantOut: "context 2048"},
		{name: "flags override the profile", args: []string{"--profile", "card=8GiB,ctx=2048", "--context", "1024", "--kv", "q4_0"}, wantOut: "context 1024"},
		{name: "default context", args: []string{"--profile", "8GiB"}, wantOut: "context 4096"},
		{name: "does not fit a tiny card", args: []string{"--profile", "1MiB"}, wantErr: "doesn't fit"},
		{name: "ollama memory model", args: []string{"--profile", "8GiB", "--runtime", "ollama"}, wantOut: "ollama"},
		{name: "bad kv", args: []string{"--profile", "8GiB", "--kv", "q3"}, wantErr: "kv_type"},
		{name: "bad size", args: []string{"--profile", "8 elephants"}, wantErr: "card"},
		{name: "no profile", args: nil, wantErr: "profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runRig(t, append([]string{"preflight", model}, tt.args...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q\n%s", err, tt.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("output lacks %q:\n%s", tt.wantOut, out)
			}
		})
	}
}

func TestPreflightJSON(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.WriteTiny(model, gguf.TinyOptions{Seed: 6}); err != nil {
		t.Fatal(err)
	}
	out, err := runRig(t, "preflight", model, "--profile", "8GiB", "--context", "2048", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v preflight.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("--json output is not a verdict: %v\n%s", err, out)
	}
	if !v.Fits || v.Profile.Context != 2048 || v.Profile.CardMemory != 8*preflight.GiB {
		t.Errorf("verdict %+v does not reflect the flags", v)
	}
}
