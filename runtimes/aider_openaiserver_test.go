package runtimes

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestAiderRunsAgainstAGenericServer runs the real Aider, in its own
// loopback-only sandbox, against llama-server started as a generic
// OpenAI-compatible server (OpenAIServer, its own /v1 endpoint): the
// recording proxy answers Aider's calls through the generic driver, so each
// call is kept with the top-K log-probabilities the server's chat endpoint
// gave and the messages as sent (the server applies its own template and
// names no token ids; the record keeps what it gives).
func TestAiderRunsAgainstAGenericServer(t *testing.T) {
	in := provisioned(t)
	m := in.Models["smollm2-135m-instruct"]
	ctx := context.Background()
	sampling := Sampling{Temperature: 0, Seed: 1}
	srv, err := StartOpenAIServer(ctx, llamaServerGenericSpec(in.LlamaServer),
		Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 4096, WorkDir: t.TempDir()},
		ServerAssets{}, RequestPins{Sampling: sampling, StopCap: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(ctx) })
	repo := gitRepo(t, map[string]string{"calc.py": "def add(a, b):\n    return a - b\n"})
	res, err := RunAider(ctx, AiderConfig{
		Binary: in.Aider, Arm: srv, WorkDir: t.TempDir(), Sampling: sampling,
		MaxTokens: 64, TopK: 5, Caps: AiderCaps{Turns: 1, Wall: 3 * time.Minute, Tokens: 256},
	}, AiderTask{Repo: repo, Files: []string{"calc.py"}, Message: "Fix add in calc.py so that it adds."})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("aider: %s\n%s", res.Describe(), res.LogTail)
	if len(res.Calls) != 1 || len(res.CallErrors) > 0 {
		t.Fatalf("%d calls kept, unanswered %v; want Aider's one call through the proxy", len(res.Calls), res.CallErrors)
	}
	if !res.Containment.Sandboxed || !res.Containment.LoopbackOnly {
		t.Errorf("aider ran without a loopback-only sandbox: %+v", res.Containment)
	}
	c := res.Calls[0]
	if c.CallID != "aider-call-1" || len(c.Steps) == 0 || c.OutputTokens != len(c.Steps) || c.LogprobsMissing != 0 {
		t.Fatalf("call %q: %d steps for %d output tokens, %d without log-probabilities", c.CallID, len(c.Steps), c.OutputTokens, c.LogprobsMissing)
	}
	for i, st := range c.Steps {
		if len(st.Top) != 5 || st.Logprob > 0 {
			t.Fatalf("step %d: %d alternatives, logprob %v; want the top-5 the proxy asked for", i, len(st.Top), st.Logprob)
		}
	}
	if c.PromptTokens == 0 || c.Timings.PromptDuration <= 0 {
		t.Errorf("usage and time to the first token not kept: %d prompt tokens, %+v", c.PromptTokens, c.Timings)
	}
	// The proxy turned Aider's request into the driver's own call: the
	// record keeps Aider's messages (its system prompt first), as the
	// generic driver keeps any chat call, not Aider's request body.
	var msgs []Message
	if err := json.Unmarshal([]byte(c.RenderedPrompt), &msgs); err != nil || len(msgs) < 2 || msgs[0].Role != "system" {
		t.Errorf("kept prompt %.120q, want Aider's messages as sent: %v", c.RenderedPrompt, err)
	}
}
