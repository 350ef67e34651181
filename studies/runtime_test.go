package studies

import (
	"slices"
	"testing"
)

// TestRuntimeParts reads each runtime a design may name into its harness,
// its engine and its components, the one place that takes the name apart.
func TestRuntimeParts(t *testing.T) {
	cases := []struct {
		rt              Runtime
		harness, engine string
		aider           bool
		components      []string
	}{
		{"ollama", "ollama", "ollama", false, []string{"ollama"}},
		{"llama-server", "llama-server", "llama-server", false, []string{"llama-server"}},
		{"aider+ollama", "aider", "ollama", true, []string{"aider", "ollama"}},
		{"aider+llama-server", "aider", "llama-server", true, []string{"aider", "llama-server"}},
		{"openai-server", "openai-server", "openai-server", false, []string{"openai-server"}},
		{"aider+openai-server", "aider", "openai-server", true, []string{"aider", "openai-server"}},
	}
	for _, c := range cases {
		if got := c.rt.Harness(); got != c.harness {
			t.Errorf("%s: harness %q, want %q", c.rt, got, c.harness)
		}
		if got := c.rt.Engine(); got != c.engine {
			t.Errorf("%s: engine %q, want %q", c.rt, got, c.engine)
		}
		if got := c.rt.Aider(); got != c.aider {
			t.Errorf("%s: aider %v, want %v", c.rt, got, c.aider)
		}
		if got := c.rt.Components(); !slices.Equal(got, c.components) {
			t.Errorf("%s: components %v, want %v", c.rt, got, c.components)
		}
		if got, want := c.rt.OpenAIServer(), c.engine == "openai-server"; got != want {
			t.Errorf("%s: openai-server %v, want %v", c.rt, got, want)
		}
	}
	for _, name := range runtimeNames {
		found := false
		for _, c := range cases {
			found = found || string(c.rt) == name
		}
		if !found {
			t.Errorf("runtime %q, which a design may name, has no case here", name)
		}
	}
}
