package runtimes

import (
	"strings"
	"testing"
)

func stepsOf(texts ...string) []Step {
	out := make([]Step, len(texts))
	for i, t := range texts {
		out[i] = Step{Candidate: Candidate{ID: -1, Text: t}}
	}
	return out
}

// Ollama's runner stops a prediction once one token (trimmed of space) has
// come 31 times running, and its answer then lacks the final message: such
// an answer is the runtime's own stop, kept; any other cut-off is not.
func TestOllamaRepeatLimitIsRecognised(t *testing.T) {
	run := func(tok string, n int) []string { return strings.Split(strings.Repeat(tok+"\x00", n), "\x00")[:n] }
	for _, c := range []struct {
		name  string
		steps []Step
		want  bool
	}{
		{"31 of one token at the end", stepsOf(append([]string{"def", " f"}, run("\n", 31)...)...), true},
		{"the same token with other spacing", stepsOf(append([]string{"x"}, append(run(" =", 16), run("= ", 15)...)...)...), true},
		{"30 in a row is under the rule", stepsOf(append([]string{"def"}, run("\n", 30)...)...), false},
		{"a run broken near the end", stepsOf(append(run("a", 40), "b")...), false},
		{"too short to be the rule", stepsOf("a", "b"), false},
	} {
		if got := ollamaRepeatLimit(c.steps); got != c.want {
			t.Errorf("%s: ollamaRepeatLimit = %v, want %v", c.name, got, c.want)
		}
	}
}
