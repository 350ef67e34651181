package runtimes

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A call whose prompt and stop cap do not fit the pinned context is refused
// on both runtimes, whether the prompt alone is too long or only the room
// for the answer is missing; a call that fits runs.
func TestPromptLongerThanTheContextIsRefused(t *testing.T) {
	words := func(n int) string { return strings.TrimSpace(strings.Repeat("river stone ", n/2)) }
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			rt := startReal(t, kind, "smollm2-135m-instruct", func(c *Config) { c.Context = 512 })
			call := func(prompt string, stopCap int) (Result, error) {
				return rt.Generate(context.Background(), Request{CallID: "fit", Messages: []Message{{Role: "user", Content: prompt}},
					Sampling: Sampling{Temperature: 0, Seed: 1}, MaxTokens: stopCap, TopK: 2})
			}
			if _, err := call("Name a river.", 16); err != nil {
				t.Fatalf("a call that fits: %v", err)
			}
			for _, c := range []struct {
				name    string
				prompt  string
				stopCap int
			}{
				{"prompt alone too long", words(1200), 16},
				{"no room for the stop cap", words(440), 128},
			} {
				_, err := call(c.prompt, c.stopCap)
				if !errors.Is(err, ErrPromptTooLong) || !strings.Contains(err.Error(), "pinned context") {
					t.Errorf("%s: want ErrPromptTooLong naming the context, got %v", c.name, err)
				}
			}
		})
	}
}
