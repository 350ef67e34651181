package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

type numericKey struct {
	Value     json.Number `json:"value"`
	Tolerance json.Number `json:"tolerance,omitempty"`
}

func readNumericKey(t Task) (want, tol float64, err error) {
	var k numericKey
	if err := decodeKey(t, &k); err != nil {
		return 0, 0, err
	}
	if want, err = k.Value.Float64(); err != nil {
		return 0, 0, fmt.Errorf("key.value: %w", err)
	}
	if k.Tolerance != "" {
		if tol, err = k.Tolerance.Float64(); err != nil || tol < 0 {
			return 0, 0, errors.New("key.tolerance must be a non-negative number")
		}
	}
	return want, tol, nil
}

var numberPattern = regexp.MustCompile(`[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?`)

// lastNumber reads the last number in a text: models tend to reason first
// and answer last. Thousands separators are accepted.
func lastNumber(s string) (float64, bool) {
	ms := numberPattern.FindAllString(s, -1)
	if len(ms) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(ms[len(ms)-1], ",", ""), 64)
	return v, err == nil
}

// Numeric passes when the last number in the output is within the key's
// absolute tolerance of the value.
type Numeric struct{}

func (Numeric) Name() string { return "numeric" }
func (Numeric) Version() int { return 1 }

func (Numeric) CheckKey(t Task) error { _, _, err := readNumericKey(t); return err }

func (Numeric) KeyOutput(t Task) (Output, error) {
	want, _, err := readNumericKey(t)
	return Output{TaskID: t.ID, Text: strconv.FormatFloat(want, 'f', -1, 64)}, err
}

func (Numeric) Grade(_ context.Context, t Task, out Output) (Grade, error) {
	want, tol, err := readNumericKey(t)
	if err != nil {
		return Grade{}, err
	}
	got, ok := lastNumber(out.Text)
	if !ok {
		return Grade{Score: 0, Details: map[string]any{"parsed": false}}, nil
	}
	d := math.Abs(got - want)
	pass := d <= tol
	score := 0.0
	if pass {
		score = 1
	}
	return Grade{Score: score, Pass: pass, Details: map[string]any{"parsed": got, "abs_error": d}}, nil
}
