package tasks

import (
	"context"
	"strings"
	"unicode"
)

// Normalized passes when the output equals the answer after case folding,
// dropping punctuation and collapsing whitespace: small models add a full
// stop or a capital that says nothing about correctness.
type Normalized struct{}

func (Normalized) Name() string { return "normalized" }
func (Normalized) Version() int { return 1 }

func (Normalized) CheckKey(t Task) error { _, err := readAnswerKey(t); return err }

func (Normalized) KeyOutput(t Task) (Output, error) {
	k, err := readAnswerKey(t)
	return Output{TaskID: t.ID, Text: k.Answer}, err
}

func (Normalized) Grade(_ context.Context, t Task, out Output) (Grade, error) {
	k, err := readAnswerKey(t)
	if err != nil {
		return Grade{}, err
	}
	got := normalize(out.Text)
	for _, want := range append([]string{k.Answer}, k.Accept...) {
		if got == normalize(want) {
			return Grade{Score: 1, Pass: true, Details: map[string]any{"normalized": got}}, nil
		}
	}
	return Grade{Score: 0, Details: map[string]any{"normalized": got}}, nil
}

// normalize lower-cases, replaces punctuation with spaces and collapses runs
// of whitespace.
func normalize(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPunct(r) || unicode.IsSymbol(r) {
			return ' '
		}
		return unicode.ToLower(r)
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
