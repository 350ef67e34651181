package run

import (
	"testing"

	"rig/internal/serverspec"
	"rig/studies"
)

// TestValidationHarnessTellsGenericServersApart: two openai-server arms on
// different servers are validated apart, arms on the same server block
// share one run named by the first of them, and rig's own runtimes are
// named by the runtime alone.
func TestValidationHarnessTellsGenericServersApart(t *testing.T) {
	v1 := &serverspec.Spec{Command: []string{"/bin/llama-server", "--port", "{port}"}, Request: map[string]any{"cache_prompt": false}}
	lcp := &serverspec.Spec{Command: []string{"/venv/bin/python", "-m", "llama_cpp.server", "--port", "{port}"}}
	d := &studies.Design{Arms: []studies.Arm{
		{Name: "native", Runtime: "llama-server"},
		{Name: "generic-a", Runtime: "openai-server", Server: v1},
		{Name: "python", Runtime: "openai-server", Server: lcp},
		{Name: "generic-b", Runtime: "openai-server", Server: &serverspec.Spec{Command: v1.Command, Request: map[string]any{"cache_prompt": false}}},
		{Name: "aider-generic", Runtime: "aider+openai-server", Server: v1},
	}}
	want := []string{"llama-server", "openai-server (server of generic-a)", "openai-server (server of python)",
		"openai-server (server of generic-a)", "aider+openai-server (server of aider-generic)"}
	for i, a := range d.Arms {
		if got := ValidationHarness(d, a); got != want[i] {
			t.Errorf("arm %s: %q, want %q", a.Name, got, want[i])
		}
	}
}
