package tasks

import (
	"context"
	"errors"
	"fmt"
	"regexp"
)

type regexKey struct {
	Pattern string `json:"pattern"`
	// Example is an output the pattern must accept; the audit uses it as
	// the key's own output.
	Example string `json:"example"`
}

func readRegexKey(t Task) (regexKey, *regexp.Regexp, error) {
	var k regexKey
	if err := decodeKey(t, &k); err != nil {
		return k, nil, err
	}
	if k.Pattern == "" || k.Example == "" {
		return k, nil, errors.New("key needs pattern and example")
	}
	re, err := regexp.Compile(k.Pattern)
	if err != nil {
		return k, nil, fmt.Errorf("key.pattern: %w", err)
	}
	return k, re, nil
}

// Regex passes when the pattern (RE2 syntax) matches anywhere in the output.
type Regex struct{}

func (Regex) Name() string { return "regex" }
func (Regex) Version() int { return 1 }

func (Regex) CheckKey(t Task) error { _, _, err := readRegexKey(t); return err }

func (Regex) KeyOutput(t Task) (Output, error) {
	k, _, err := readRegexKey(t)
	return Output{TaskID: t.ID, Text: k.Example}, err
}

func (Regex) Grade(_ context.Context, t Task, out Output) (Grade, error) {
	_, re, err := readRegexKey(t)
	if err != nil {
		return Grade{}, err
	}
	if re.MatchString(out.Text) {
		return Grade{Score: 1, Pass: true}, nil
	}
	return Grade{Score: 0}, nil
}
