package studies

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// validateEdited parses and validates the demo design after edit, returning
// its problems (nil when it passes).
func validateEdited(t *testing.T, edit func(m map[string]any)) *ValidationError {
	t.Helper()
	d, err := ParseDesign("design.json", mutated(t, edit))
	if err == nil {
		err = Validate(context.Background(), d, ValidateOptions{File: "design.json"})
	}
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	return ve
}

func TestGuardrailsAndPolicyAccepted(t *testing.T) {
	ve := validateEdited(t, func(m map[string]any) {
		m["guardrails"] = []any{
			map[string]any{"metric": "p95_latency", "max_relative_increase": 0.1},
			map[string]any{"metric": "peak_memory", "max_absolute_increase": 512},
			map[string]any{"metric": "receipt.output_tokens", "direction": "lower", "max_relative_increase": 0.5},
		}
		m["winner_policy"] = map[string]any{"min_pass_rate_delta": 0, "max_cost_increase": 0.15, "max_p95_latency_increase": 0.1}
	})
	if ve != nil {
		t.Fatalf("a valid guardrail list and winner policy were refused:\n%v", ve)
	}
	// And the schema, which the editor reads, agrees.
	c := loadSchema(t)
	var v any
	if err := json.Unmarshal(mutated(t, func(m map[string]any) {
		m["guardrails"] = []any{map[string]any{"metric": "receipt.output_tokens", "direction": "lower", "max_relative_increase": 0.5}}
		m["winner_policy"] = map[string]any{"allow_regressions": true}
	}), &v); err != nil {
		t.Fatal(err)
	}
	if errs := c.validate(v); len(errs) > 0 {
		t.Errorf("the schema refuses a valid guardrail: %v", errs)
	}
}

func TestGuardrailsAndPolicyRefused(t *testing.T) {
	cases := []struct {
		name string
		g    []any
		pol  map[string]any
		path string
		want string
	}{
		{"unknown metric", []any{map[string]any{"metric": "latency", "max_relative_increase": 0.1}}, nil, "guardrails[0].metric", "p95_latency"},
		{"bad receipt field", []any{map[string]any{"metric": "receipt.Output Tokens", "direction": "lower", "max_relative_increase": 0.1}}, nil, "guardrails[0].metric", "output_tok_s"},
		// A receipt field that is not a measurement would read nothing: refused.
		{"no such receipt field", []any{map[string]any{"metric": "receipt.output_per_second", "direction": "higher", "max_relative_increase": 0.1}}, nil, "guardrails[0].metric", "output_tok_s"},
		{"receipt without direction", []any{map[string]any{"metric": "receipt.output_tokens", "max_relative_increase": 0.1}}, nil, "guardrails[0].direction", `"lower" or "higher"`},
		{"neither limit", []any{map[string]any{"metric": "energy"}}, nil, "guardrails[0]", "exactly one of max_relative_increase"},
		{"both limits", []any{map[string]any{"metric": "energy", "max_relative_increase": 0.1, "max_absolute_increase": 2}}, nil, "guardrails[0]", "in Wh"},
		{"negative limit", []any{map[string]any{"metric": "wall_time", "max_absolute_increase": -1}}, nil, "guardrails[0].max_absolute_increase", "0 or more, in s"},
		{"twice", []any{map[string]any{"metric": "energy", "max_relative_increase": 0.1}, map[string]any{"metric": "energy", "max_relative_increase": 0.2}}, nil, "guardrails[1].metric", "already guardrails[0]"},
		{"direction on a named metric", []any{map[string]any{"metric": "energy", "direction": "higher", "max_relative_increase": 0.1}}, nil, "guardrails[0].direction", "leave direction out"},
		{"policy delta past 1", nil, map[string]any{"min_pass_rate_delta": 2}, "winner_policy.min_pass_rate_delta", "from -1 to 1"},
		{"policy negative cost", nil, map[string]any{"max_cost_increase": -0.1}, "winner_policy.max_cost_increase", "0.15 for 15%"},
		{"policy negative p95", nil, map[string]any{"max_p95_latency_increase": -1}, "winner_policy.max_p95_latency_increase", "from 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ve := validateEdited(t, func(m map[string]any) {
				if tc.g != nil {
					m["guardrails"] = tc.g
				}
				if tc.pol != nil {
					m["winner_policy"] = tc.pol
				}
			})
			if ve == nil {
				t.Fatal("accepted")
			}
			var msg string
			for _, p := range ve.Problems {
				if p.Path == tc.path {
					msg = p.Error()
				}
			}
			if !strings.HasPrefix(msg, "design.json: "+tc.path+": ") || !strings.Contains(msg, tc.want) {
				t.Errorf("problem at %s = %q, want the file, the field and %q; all:\n%v", tc.path, msg, tc.want, ve)
			}
		})
	}
}

func TestWinnerPolicyUnknownFieldNamed(t *testing.T) {
	_, err := ParseDesign("design.json", mutated(t, func(m map[string]any) {
		m["winner_policy"] = map[string]any{"maximumCostIncreasePercent": 15}
	}))
	var ve *ValidationError
	if !errors.As(err, &ve) || !ve.Has(KindUnknownField, "winner_policy.maximumCostIncreasePercent") {
		t.Fatalf("got %v, want an unknown field at winner_policy.maximumCostIncreasePercent", err)
	}
	if !strings.Contains(err.Error(), "max_cost_increase") {
		t.Errorf("%v does not list the known fields", err)
	}
}
