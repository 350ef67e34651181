package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// stallingArm is the real arm until its third call, which it holds until the
// caller gives up, as a runtime that stopped making progress would: the wall
// cap, not the model, then ends the run.
type stallingArm struct {
	runtimes.Runtime
	mu    sync.Mutex
	calls int
}

func (s *stallingArm) Generate(ctx context.Context, req runtimes.Request) (runtimes.Result, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if n < 3 {
		return s.Runtime.Generate(ctx, req)
	}
	<-ctx.Done()
	return runtimes.Result{}, ctx.Err()
}

// Aider makes two complete calls on a real llama-server, and its third is
// cut by the wall cap: both complete calls are kept with their
// log-probabilities, the run is capped by time (not failed), and replay
// through the pinned model reproduces both.
func TestWallCapKeepsTheCallsBeforeIt(t *testing.T) {
	in := replayProvisioned(t)
	ctx := context.Background()
	work := t.TempDir()
	stack, err := startReplayStack(ctx, in, "llama-server", goalModel, work, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.stop()
	repo := filepath.Join(work, "repo")
	if err := tasks.Materialize(ctx, repo, map[string]string{"calc.py": "def add(a, b):\n    return a - b\n"}); err != nil {
		t.Fatal(err)
	}
	pins := studies.Pins{Sampling: studies.Sampling{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42}, StopCap: 32}
	arm := &stallingArm{Runtime: stack.rt}
	const wall = 45 * time.Second
	ar, err := runtimes.RunAider(ctx, runtimes.AiderConfig{Binary: in.Aider, Arm: arm, WorkDir: filepath.Join(work, "aider"),
		Sampling: armSampling(pins), MaxTokens: pins.StopCap, TopK: genrecord.DefaultK, Caps: runtimes.AiderCaps{Turns: 3, Tokens: 2048, Wall: wall}},
		runtimes.AiderTask{Repo: repo, Files: []string{"calc.py"}, Message: "Fix add in calc.py so that it adds.",
			Before: []string{"What does add in calc.py return for 2 and 3?", "Which line of calc.py is wrong?"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("aider: %s\n%s", ar.Describe(), ar.LogTail)
	if !ar.Capped || ar.CapHit != "time" || ar.Wall < wall {
		t.Errorf("the run was not capped by the wall: capped %v by %q after %s", ar.Capped, ar.CapHit, ar.Wall)
	}
	if len(ar.CallErrors) != 0 {
		t.Errorf("the cut call was counted as the arm's failure: %q", ar.CallErrors)
	}
	if len(ar.Calls) != 2 || ar.Turns != 2 {
		t.Fatalf("kept %d calls (%d turns), want the two that completed before the wall", len(ar.Calls), ar.Turns)
	}
	var rows []genrecord.Row
	for i, c := range ar.Calls {
		if len(c.Steps) == 0 || c.OutputTokens == 0 {
			t.Errorf("call %d kept without its tokens: %+v", i+1, c)
		}
		rows = append(rows, callrow.Row(fmt.Sprintf("wall-cut/call-%d", i+1), goalModel, genrecord.RoleAider, callrow.Sampling(armSampling(pins), pins.StopCap), genrecord.DefaultK, c))
	}
	if ar.OutputTokens != ar.Calls[0].OutputTokens+ar.Calls[1].OutputTokens {
		t.Errorf("output tokens %d are not the two kept calls' %d + %d", ar.OutputTokens, ar.Calls[0].OutputTokens, ar.Calls[1].OutputTokens)
	}
	set := replaySet{work: work}
	rec, err := set.record("wall-cut.jsonl", stack.header.Pins, rows)
	if err != nil {
		t.Fatal(err)
	}
	g, err := replayGroup(ctx, "calls before the wall", SideGenuine, rec, stack.rescorer(), "llama-server")
	if err != nil {
		t.Fatal(err)
	}
	if g.Exact != 2 {
		for _, r := range g.results {
			t.Errorf("%s: %s %s", r.RowID, r.Status, r.Error)
		}
	}
}
