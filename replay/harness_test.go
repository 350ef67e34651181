package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/provision"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// TestReplayAiderCalls runs the real Aider against a real arm on each runtime
// and replays its kept calls: they went through the arm's driver, so each is
// kept with its rendered prompt and replays exactly; a one-token edit of one
// is caught. On Ollama, calls kept by the older proxy (the chat request it
// sent to Ollama's OpenAI-compatible endpoint) are made here the same way and
// must replay exactly too. SmolLM2 runs on Ollama's llama.cpp runner, where
// the repeat penalty applies, so a call made outside the recorded pins would
// show.
func TestReplayAiderCalls(t *testing.T) {
	in := replayProvisioned(t)
	for _, kind := range []string{"llama-server", "ollama"} {
		t.Run(kind, func(t *testing.T) { replayAiderCalls(t, in, kind) })
	}
}

func replayAiderCalls(t *testing.T, in provision.Installed, kind string) {
	ctx := context.Background()
	work := t.TempDir()
	stack, err := startReplayStack(ctx, in, kind, goalModel, work, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.stop()

	repo := filepath.Join(work, "repo")
	if err := tasks.Materialize(ctx, repo, map[string]string{"calc.py": "def add(a, b):\n    return a - b\n"}); err != nil {
		t.Fatal(err)
	}
	pins := studies.Pins{Sampling: studies.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42}, StopCap: 48}
	ar, err := runtimes.RunAider(ctx, runtimes.AiderConfig{Binary: in.Aider, Arm: stack.rt, WorkDir: filepath.Join(work, "aider"),
		Sampling: armSampling(pins), MaxTokens: pins.StopCap, TopK: genrecord.DefaultK, Caps: runtimes.AiderCaps{Turns: 2, Wall: 4 * time.Minute}},
		runtimes.AiderTask{Repo: repo, Files: []string{"calc.py"}, Message: "Fix add in calc.py so that it adds."})
	if err != nil {
		t.Fatal(err)
	}
	if len(ar.Calls) == 0 {
		t.Fatalf("Aider made no model call: %s\n%s", ar.Describe(), ar.LogTail)
	}
	var rows []genrecord.Row
	for i, c := range ar.Calls {
		if kind == "llama-server" && len(c.PromptTokenIDs) == 0 {
			t.Errorf("Aider's call %d on llama-server kept no prompt token ids", i+1)
		}
		rows = append(rows, callrow.Row(fmt.Sprintf("aider-%d", i+1), goalModel, genrecord.RoleAider, callrow.Sampling(armSampling(pins), pins.StopCap), genrecord.DefaultK, c))
	}
	driverRows := len(rows)

	// Calls as the older proxy kept them: the request body it sent to
	// Ollama's OpenAI-compatible endpoint, with Ollama's defaults for what
	// that endpoint cannot take.
	ollama, isOllama := stack.rt.(*runtimes.Ollama)
	for i, ask := range []string{"Fix add in calc.py so that it adds.", "Write a haiku about tests."} {
		body, _ := json.Marshal(map[string]any{"model": "rig-arm", "messages": []map[string]string{{"role": "user", "content": ask}},
			"temperature": 0.7, "top_p": 0.95, "seed": 42, "max_tokens": 32, "logprobs": true, "top_logprobs": genrecord.DefaultK})
		if !isOllama {
			break
		}
		res, err := ollama.OpenAIChat(ctx, body)
		if err != nil {
			t.Fatal(err)
		}
		res.CallID = fmt.Sprintf("legacy-call-%d", i+1)
		rows = append(rows, callrow.Row(fmt.Sprintf("legacy-%d", i+1), goalModel, genrecord.RoleAider, callrow.Sampling(armSampling(pins), 32), genrecord.DefaultK, res))
	}
	set := replaySet{work: work}
	rec, err := set.record("aider.jsonl", stack.header.Pins, rows)
	if err != nil {
		t.Fatal(err)
	}
	g, err := replayGroup(ctx, "aider calls", SideGenuine, rec, stack.rescorer(), kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Aider on %s: %d calls by the driver + %d kept as chat requests; %d/%d reproduced exactly, max |Δ| %.3g nats",
		kind, driverRows, len(rows)-driverRows, g.Exact, g.Rows, g.MaxToken)
	if g.Exact != len(rows) {
		for _, r := range g.results {
			t.Errorf("%s: %s %v %s", r.RowID, r.Status, r.Comparison.First, r.Error)
		}
	}

	// A one-token edit of a driver-kept call, and of a legacy call where
	// there is one, is caught.
	var edited []genrecord.Row
	pick := []genrecord.Row{rows[0]}
	if len(rows) > 1 {
		pick = append(pick, rows[len(rows)-1])
	}
	for _, r := range pick {
		if e, _, ok := editOneToken(r, 5); ok {
			edited = append(edited, e)
		}
	}
	if len(edited) != len(pick) {
		t.Fatalf("only %d of %d rows could be edited", len(edited), len(pick))
	}
	recE, err := set.record("aider-edited.jsonl", stack.header.Pins, edited)
	if err != nil {
		t.Fatal(err)
	}
	e, err := replayGroup(ctx, "edited aider calls", SideControl, recE, stack.rescorer(), kind)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range e.results {
		if r.Status == genrecord.StatusReproduced {
			t.Errorf("the edit of %s was not caught", r.RowID)
		}
	}
	t.Logf("one-token edits of Aider calls: %d/%d caught", e.Rows-e.Exact, e.Rows)
}

// armSampling is an arm's pinned sampling as the runtimes take it.
func armSampling(p studies.Pins) runtimes.Sampling {
	return runtimes.Sampling{Temperature: p.Sampling.Temperature, TopK: p.Sampling.TopK, TopP: p.Sampling.TopP, MinP: p.Sampling.MinP, Seed: int(p.Sampling.Seed)}
}
