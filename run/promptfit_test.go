package run

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
	"rig/runtimes"
)

// At freeze every task's prompt is counted with the arm's model tokenizer
// through the real llama-server: the demo's prompts fit its pins, and with
// the context pinned too small each task is named with its count.
func TestFreezeCountsPromptsWithTheArmsTokenizer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real llama-server (drop -short to run it)")
	}
	in, err := provision.Load()
	if err != nil {
		t.Skipf("needs rig's provisioned runtimes and models (run: make setup): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, snap, _, dir := freezeDemoSlice(t, ctx, in, nil)
	if over, err := CheckPromptsFit(ctx, env, snap, dir); err != nil || len(over) != 0 {
		t.Fatalf("the demo's prompts fit its pins, got %v %v", over, err)
	}
	env, snap, d, dir := freezeDemoSlice(t, ctx, in, func(m map[string]any) {
		for _, a := range m["arms"].([]any) {
			pins := a.(map[string]any)["pins"].(map[string]any)
			pins["context"], pins["stop_cap"] = 128.0, 96.0
		}
	})
	over, err := CheckPromptsFit(ctx, env, snap, dir)
	if !errors.Is(err, runtimes.ErrPromptTooLong) {
		t.Fatalf("want ErrPromptTooLong, got %v", err)
	}
	if len(over) == 0 || len(over)%len(d.Arms) != 0 {
		t.Fatalf("want every task named for every arm, got %v", over)
	}
	for i, p := range over {
		if p.Tokens <= 0 || p.Tokens+p.StopCap <= p.Context {
			t.Errorf("%v: not an overflow", p)
		}
		if i < 20 && !strings.Contains(err.Error(), p.String()) { // the message names the first 20, then counts
			t.Errorf("%v not named in %v", p, err)
		}
	}
	if len(over) > 20 && !strings.Contains(err.Error(), "more") {
		t.Errorf("the message does not count the rest: %v", err)
	}
}
