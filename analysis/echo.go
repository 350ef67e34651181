package analysis

import "strings"

// EchoesPrompt reports whether output repeats a stretch of prompt instead
// of answering it: the longest run of consecutive output words that also
// runs, in order, through the prompt is at least half the prompt's words
// (never under 8 words, never asked to be over 20). A base model given a
// chat template typically copies the prompt and carries on, until the stop
// cap; an answer that quotes a few words of its input does not reach the
// bar. Words are compared lowercased, split on white space. It sets
// Trial.RepeatsPrompt, which only shapes the stop-cap warning.
func EchoesPrompt(prompt, output string) bool {
	pw, ow := strings.Fields(strings.ToLower(prompt)), strings.Fields(strings.ToLower(output))
	need := max(8, min(20, len(pw)/2))
	if len(pw) < need || len(ow) < need {
		return false
	}
	// Shingles of k words of the prompt; a run of covered output words is
	// a stretch whose every k-window appears in the prompt.
	const k = 4
	seen := make(map[string]bool, len(pw))
	for i := 0; i+k <= len(pw); i++ {
		seen[strings.Join(pw[i:i+k], "\x00")] = true
	}
	run, best := 0, 0
	for i := 0; i+k <= len(ow); i++ {
		if seen[strings.Join(ow[i:i+k], "\x00")] {
			if run == 0 {
				run = k
			} else {
				run++
			}
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best >= need
}
