package studies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"rig/internal/serverspec"
)

// aiderArm is the demo design's Aider candidate (arms[4], aider+ollama on
// the fix-test job kind), the arm these tests put on a generic server.
const aiderArm = 4

// TestAiderOverOpenAIServerValidation: "aider+openai-server" is a runtime a
// design may name; like a plain openai-server arm it needs its server
// described, and the server must speak chat, since Aider's calls are
// answered through its chat endpoint. A described one validates.
func TestAiderOverOpenAIServerValidation(t *testing.T) {
	good := &serverspec.Spec{Command: []string{"${LLAMA_SERVER_BIN}", "--port", "{port}", "-m", "{model}"}, Ready: "/health"}
	completionsOnly := &serverspec.Spec{Command: good.Command, API: []string{serverspec.APICompletions}}
	for _, c := range []struct {
		name   string
		server *serverspec.Spec
		kind   ProblemKind
		path   string
	}{
		{"no server", nil, KindMissing, "arms[4].server"},
		{"completions only", completionsOnly, KindInvalid, "arms[4].server.api"},
		{"no port", &serverspec.Spec{Command: []string{"/bin/vllm", "serve"}}, KindInvalid, "arms[4].server.command"},
	} {
		d := demoDesign(t)
		d.Arms[aiderArm].Runtime, d.Arms[aiderArm].Server = "aider+openai-server", c.server
		err := Validate(context.Background(), d, ValidateOptions{})
		var ve *ValidationError
		if !errors.As(err, &ve) || !ve.Has(c.kind, c.path) {
			t.Errorf("%s: %v, want %s at %s", c.name, err, c.kind, c.path)
		}
	}
	d := demoDesign(t)
	d.Arms[aiderArm].Runtime, d.Arms[aiderArm].Server = "aider+openai-server", good
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Errorf("a described aider+openai-server arm: %v", err)
	}
	both := *good
	both.API = []string{serverspec.APICompletions, serverspec.APIChat}
	d.Arms[aiderArm].Server = &both
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Errorf("an aider+openai-server arm whose server speaks chat and completions: %v", err)
	}
	// Its runtime reads as both: Aider's harness, a generic server's engine.
	if !d.Arms[aiderArm].Runtime.Aider() || !d.Arms[aiderArm].Runtime.OpenAIServer() {
		t.Errorf("aider+openai-server reads as aider %v, openai-server %v; want both", d.Arms[aiderArm].Runtime.Aider(), d.Arms[aiderArm].Runtime.OpenAIServer())
	}
}

// TestAiderOverOpenAIServerFreezes: an aider+openai-server arm freezes
// Aider's binary and the arm's own server (its executable's digest under
// server:ARM, as a plain openai-server arm's), and a changed server
// executable is a stale asset before a run.
func TestAiderOverOpenAIServerFreezes(t *testing.T) {
	ctx := context.Background()
	fx := newFreezeFixture(t)
	exe := filepath.Join(t.TempDir(), "my-server")
	if err := os.WriteFile(exe, []byte("a generic server"), 0o700); err != nil {
		t.Fatal(err)
	}
	a := &fx.design.Arms[aiderArm]
	a.Runtime = "aider+openai-server"
	a.Server = &serverspec.Spec{Command: []string{exe, "--port", "{port}", "-m", "{model}"}}
	reg, err := Fingerprint(ctx, fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Freeze(ctx, FreezeInput{Design: fx.design, Registered: reg, Validate: fx.opts}, fx.assets)
	if err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	fa, ok := s.Arm(a.Name)
	if !ok {
		t.Fatalf("arm %s is not in the snapshot", a.Name)
	}
	var components []string
	for _, b := range fa.Binaries {
		components = append(components, b.Component)
	}
	if !slices.Equal(components, []string{HarnessAider, serverspec.Kind}) {
		t.Errorf("froze binaries %v, want Aider's and the server's", components)
	}
	sum, _ := sha256File(exe)
	if b, ok := fa.Server(); !ok || b.Path != exe || b.SHA256 != sum {
		t.Errorf("frozen server %+v (found %v), want %s at %s", b, ok, exe, sum)
	}
	aiderSum, _ := sha256File(fx.files["aider"])
	if s.Assets["server:"+a.Name] != sum || s.Assets["runtime:aider"] != aiderSum {
		t.Errorf("assets server:%s = %q, runtime:aider = %q; want the server's and Aider's digests", a.Name, s.Assets["server:"+a.Name], s.Assets["runtime:aider"])
	}
	if _, ok := s.Assets["runtime:"+serverspec.Kind]; ok {
		t.Error("the generic server was resolved as a provisioned runtime")
	}
	if err := CheckStale(ctx, s, fx.assets); err != nil {
		t.Fatalf("nothing changed, yet: %v", err)
	}
	if err := os.WriteFile(exe, []byte("another server"), 0o700); err != nil {
		t.Fatal(err)
	}
	var stale *StaleAssetError
	if err := CheckStale(ctx, s, fx.assets); !errors.As(err, &stale) || stale.Asset != "server:"+a.Name {
		t.Errorf("a changed server executable: %v, want a stale asset server:%s", err, a.Name)
	}
}
