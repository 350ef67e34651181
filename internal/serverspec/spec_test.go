package serverspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpeaks(t *testing.T) {
	if !(Spec{}).Speaks(APIChat) || (Spec{}).Speaks(APICompletions) {
		t.Error("a spec naming no API speaks chat only")
	}
	if s := (Spec{API: []string{APICompletions}}); s.Speaks(APIChat) || !s.Speaks(APICompletions) {
		t.Error("api [completions]")
	}
}

// FuzzDistMetadata feeds arbitrary METADATA headers to the reader: it reads
// a name and a version or refuses, never panics, and never returns an empty
// name with no error.
func FuzzDistMetadata(f *testing.F) {
	f.Add([]byte("Metadata-Version: 2.1\nName: uvicorn\nVersion: 0.30.0\n\nbody"))
	f.Add([]byte("Name: \nVersion: 1\n"))
	f.Add([]byte(strings.Repeat("X: y\n", 500) + "Name: a\nVersion: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "METADATA")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		name, version, err := distMetadata(p)
		if err == nil && (name == "" || version == "") {
			t.Fatalf("no error but name %q version %q", name, version)
		}
	})
}

// TestCheckSlots refuses pins.slots above 1 for a command with no {slots}
// placeholder, naming the field and the fix.
func TestCheckSlots(t *testing.T) {
	one := Spec{Command: []string{"/venv/bin/python", "-m", "llama_cpp.server", "--port", "{port}"}}
	if err := one.CheckSlots(1); err != nil {
		t.Errorf("one slot: %v", err)
	}
	err := one.CheckSlots(2)
	if err == nil || !strings.HasPrefix(err.Error(), "command: no {slots} placeholder") || !strings.Contains(err.Error(), "--parallel") {
		t.Errorf("two slots on a server that serves one: %v", err)
	}
	par := Spec{Command: []string{"/bin/llama-server", "--port", "{port}", "--parallel", "{slots}", "--ctx-size", "{context_total}"}}
	if err := par.CheckSlots(4); err != nil || !par.ServesSlots() {
		t.Errorf("a command with {slots}: %v", err)
	}
}

// TestCheckRequest takes a server's own switches in request and refuses,
// naming the field, one that rig sends for a pin (or an alias a server
// reads before it), one that changes sampling, and one that changes the
// answer's shape; the pin form has its keys sorted.
func TestCheckRequest(t *testing.T) {
	base := Spec{Command: []string{"/bin/llama-server", "--port", "{port}"}}
	ok := base
	ok.Request = map[string]any{"cache_prompt": false, "n_keep": 0}
	if err := ok.Check(); err != nil {
		t.Errorf("a server's own switches: %v", err)
	}
	if got := ok.RequestPin(); got != `{"cache_prompt":false,"n_keep":0}` {
		t.Errorf("request pin %s", got)
	}
	if (Spec{}).RequestPin() != "" {
		t.Error("no request block must pin nothing")
	}
	for field, want := range map[string]string{
		"n_predict":        "rig sends n_predict itself",
		"temperature":      "rig sends temperature itself",
		"repeat_penalty":   "changes how tokens are chosen",
		"n":                "changes the answer's shape",
		"prompt_logprobs":  "rig sends prompt_logprobs itself",
		"presence_penalty": "changes how tokens are chosen",
	} {
		bad := base
		bad.Request = map[string]any{"cache_prompt": false, field: 1}
		err := bad.Check()
		if err == nil || !strings.HasPrefix(err.Error(), "request."+field+": ") || !strings.Contains(err.Error(), want) {
			t.Errorf("request.%s: %v, want %q", field, err, want)
		}
	}
	big := base
	big.Request = map[string]any{"x": strings.Repeat("a", maxRequestBytes)}
	if err := big.Check(); err == nil || !strings.HasPrefix(err.Error(), "request: ") {
		t.Errorf("a request block over the cap: %v", err)
	}
}
