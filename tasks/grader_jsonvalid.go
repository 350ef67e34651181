package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsonValidKey is the key of a task whose answer must be JSON (promptfoo's
// is-json): an optional JSON Schema the value must satisfy, and an example
// output that does, which the audit grades as the key's own output.
type jsonValidKey struct {
	Schema  json.RawMessage `json:"schema,omitempty"`
	Example string          `json:"example,omitempty"`
}

func readJSONValidKey(t Task) (jsonValidKey, *jsonschema.Schema, error) {
	var k jsonValidKey
	if err := decodeKey(t, &k); err != nil {
		return k, nil, err
	}
	if len(k.Schema) == 0 {
		return k, nil, nil
	}
	if k.Example == "" {
		return k, nil, errors.New("key.example is empty: with a schema, give an output it accepts")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(k.Schema))
	if err != nil {
		return k, nil, fmt.Errorf("key.schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("key.schema.json", doc); err != nil {
		return k, nil, fmt.Errorf("key.schema: %w", err)
	}
	sch, err := c.Compile("key.schema.json")
	if err != nil {
		return k, nil, fmt.Errorf("key.schema: %w", err)
	}
	return k, sch, nil
}

// JSONValid passes when the whole output, trimmed of surrounding space, is
// one JSON value and, when the key has a schema, the value satisfies it. It
// is promptfoo's is-json: unlike json@v1, prose or fences around the value
// fail, since the assertion asks for JSON and nothing else.
type JSONValid struct{}

func (JSONValid) Name() string { return "jsonvalid" }
func (JSONValid) Version() int { return 1 }

func (JSONValid) CheckKey(t Task) error { _, _, err := readJSONValidKey(t); return err }

func (JSONValid) KeyOutput(t Task) (Output, error) {
	k, _, err := readJSONValidKey(t)
	if k.Example == "" {
		k.Example = "{}"
	}
	return Output{TaskID: t.ID, Text: k.Example}, err
}

func (JSONValid) Grade(_ context.Context, t Task, out Output) (Grade, error) {
	_, sch, err := readJSONValidKey(t)
	if err != nil {
		return Grade{}, err
	}
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(out.Text)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Grade{Details: map[string]any{"parsed": false}}, nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Grade{Details: map[string]any{"parsed": false, "trailing": true}}, nil
	}
	if sch != nil {
		if err := sch.Validate(v); err != nil {
			return Grade{Details: map[string]any{"parsed": true, "schema_error": err.Error()}}, nil
		}
	}
	return Grade{Score: 1, Pass: true, Details: map[string]any{"parsed": true}}, nil
}
