package tasks

import (
	"context"
	"errors"
	"strings"
)

// answerKey is the key shape of the exact and normalized graders.
type answerKey struct {
	Answer string   `json:"answer"`
	Accept []string `json:"accept,omitempty"`
}

func readAnswerKey(t Task) (answerKey, error) {
	var k answerKey
	if err := decodeKey(t, &k); err != nil {
		return k, err
	}
	if k.Answer == "" {
		return k, errors.New(`key.answer is empty`)
	}
	return k, nil
}

// Exact passes when the output, trimmed of surrounding space, equals the
// answer or one of the accepted alternatives byte for byte.
type Exact struct{}

func (Exact) Name() string { return "exact" }
func (Exact) Version() int { return 1 }

func (Exact) CheckKey(t Task) error { _, err := readAnswerKey(t); return err }

func (Exact) KeyOutput(t Task) (Output, error) {
	k, err := readAnswerKey(t)
	return Output{TaskID: t.ID, Text: k.Answer}, err
}

func (Exact) Grade(_ context.Context, t Task, out Output) (Grade, error) {
	k, err := readAnswerKey(t)
	if err != nil {
		return Grade{}, err
	}
	got := strings.TrimSpace(out.Text)
	for _, want := range append([]string{k.Answer}, k.Accept...) {
		if got == strings.TrimSpace(want) {
			return Grade{Score: 1, Pass: true}, nil
		}
	}
	return Grade{Score: 0}, nil
}
