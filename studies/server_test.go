package studies

import (
	"context"
	"errors"
	"strings"
	"testing"

	"rig/internal/serverspec"
)

func TestOpenAIServerArmValidation(t *testing.T) {
	good := &serverspec.Spec{Command: []string{"${LLAMA_SERVER_BIN}", "--port", "{port}", "-m", "{model}"}, Ready: "/health"}
	for _, c := range []struct {
		name    string
		runtime Runtime
		server  *serverspec.Spec
		kind    ProblemKind
		path    string
	}{
		{"no server", "openai-server", nil, KindMissing, "arms[0].server"},
		{"server on llama-server", "llama-server", good, KindInvalid, "arms[0].server"},
		{"relative executable", "openai-server", &serverspec.Spec{Command: []string{"vllm", "serve", "--port", "{port}"}}, KindInvalid, "arms[0].server.command"},
		{"no port", "openai-server", &serverspec.Spec{Command: []string{"/bin/vllm", "serve"}}, KindInvalid, "arms[0].server.command"},
		{"bad api", "openai-server", &serverspec.Spec{Command: good.Command, API: []string{"embeddings"}}, KindInvalid, "arms[0].server.api"},
		{"slots without {slots}", "openai-server", good, KindInvalid, "arms[0].pins.slots"},
		{"request sets a pin", "openai-server", &serverspec.Spec{Command: good.Command, Request: map[string]any{"cache_prompt": false, "n_predict": 9}}, KindInvalid, "arms[0].server.request.n_predict"},
	} {
		d := demoDesign(t)
		d.Arms[0].Runtime, d.Arms[0].Server = c.runtime, c.server
		if strings.HasPrefix(c.name, "slots") {
			d.Arms[0].Pins.Slots = 2
		}
		err := Validate(context.Background(), d, ValidateOptions{})
		var ve *ValidationError
		if !errors.As(err, &ve) || !ve.Has(c.kind, c.path) {
			t.Errorf("%s: %v, want %s at %s", c.name, err, c.kind, c.path)
		}
	}
	d := demoDesign(t)
	d.Arms[0].Runtime, d.Arms[0].Server = "openai-server", good
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Errorf("a described openai-server arm: %v", err)
	}
	for i := range d.Arms {
		d.Arms[i].Pins.Slots = 2 // shared pins hold slots equal across the job kind
	}
	d.Arms[0].Server = &serverspec.Spec{Command: append(append([]string{}, good.Command...), "--parallel", "{slots}"), Ready: "/health"}
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Errorf("an openai-server arm at slots 2 whose command has {slots}: %v", err)
	}
	for i := range d.Arms {
		d.Arms[i].Pins.Slots = 0
	}
	d.Arms[0].Server = good
	spec, err := d.Arms[0].ServerSpec(ResolveOptions{Lookup: func(k string) (string, bool) { return "/opt/bin/llama-server", k == "LLAMA_SERVER_BIN" }})
	if err != nil || spec.Command[0] != "/opt/bin/llama-server" || d.Arms[0].Server.Command[0] != "${LLAMA_SERVER_BIN}" {
		t.Errorf("expanded %v (design keeps %v): %v", spec, d.Arms[0].Server.Command, err)
	}
}
