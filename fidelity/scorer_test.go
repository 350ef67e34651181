package fidelity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"rig/runtimes"
)

// A scorer process the caller's watch preempts is stopped and the call
// fails with ErrPreempted, the watch ended. The binary is a fake that
// would run for a minute: the test is of the watch, not the scorer.
func TestScorerStopsWhenItsWatchPreempts(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-rig-prefill-score")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	preempted := make(chan struct{})
	ended := false
	s := Scorer{Bin: fake, Threads: 1, Work: filepath.Join(dir, "work"), NoSandbox: true,
		Watch: func(_ context.Context, sb *runtimes.Sandbox) (<-chan struct{}, func(), error) {
			if sb == nil {
				t.Error("the watch was given no sandbox")
			}
			close(preempted)
			return preempted, func() { ended = true }, nil
		}}
	_, err := s.Score(context.Background(), "ref.gguf", "arm.gguf", 8, []Segment{{Unit: "t1", Context: 2, Tokens: []int{1, 2, 3}}})
	if !errors.Is(err, ErrPreempted) {
		t.Fatalf("Score = %v, want ErrPreempted", err)
	}
	if !ended {
		t.Error("the watch was not ended")
	}

	// A watch that cannot start stops the process and says why.
	refuse := errors.New("the governor holds the queue")
	s.Watch = func(context.Context, *runtimes.Sandbox) (<-chan struct{}, func(), error) { return nil, nil, refuse }
	if _, err := s.Score(context.Background(), "ref.gguf", "arm.gguf", 8, []Segment{{Unit: "t1", Context: 2, Tokens: []int{1, 2, 3}}}); !errors.Is(err, refuse) {
		t.Errorf("Score = %v, want the watch's refusal", err)
	}
}
