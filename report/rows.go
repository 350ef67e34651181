package report

import (
	"slices"
	"strings"
)

// Scores are a job kind's per-task values, the unit the analysis computed
// every number on (each task's repeats averaged). The HTML report embeds
// them so its gate slider recomputes the threshold sweep's pass rates and
// the pairs' flips at any gate; at a sweep gate they equal the sweep.
type Scores struct {
	Arms  []string `json:"arms"`
	Tasks []string `json:"tasks"`
	// Values[a][t] is arm a's value on task t; nil where the arm has no
	// scored trial for the task (a missing pair, never a zero).
	Values [][]*float64 `json:"values"`
}

// Row is one task of one named pair in the paired-rows matrix: both sides'
// outputs and receipts, and what the filters read.
type Row struct {
	// Pair indexes the job kind's Pairs.
	Pair     int      `json:"pair"`
	Task     string   `json:"task"`
	Category string   `json:"category,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	// HighCost marks a challenger whose wall time on the task is over the
	// design's cost factor times the baseline's.
	HighCost   bool    `json:"high_cost,omitempty"`
	Baseline   RowSide `json:"baseline"`
	Challenger RowSide `json:"challenger"`
}

// RowSide is one arm's side of a row.
type RowSide struct {
	Output string `json:"output"`
	// Repeats counted and how many of them passed at the design's gate; the
	// repeats disagree when some but not all passed.
	Repeats int `json:"repeats"`
	Passed  int `json:"passed"`
	// ToolError: an attempt ended in error (the runtime or harness failed).
	// PolicyBlock: the governor preempted an attempt under one of its
	// policies.
	ToolError   bool        `json:"tool_error,omitempty"`
	PolicyBlock bool        `json:"policy_block,omitempty"`
	Receipt     *RowReceipt `json:"receipt,omitempty"`
	// Replay is the replay result of the trial's generation rows; empty
	// when none was replayed.
	Replay ReplayStatus `json:"replay,omitempty"`
}

// RowReceipt is what a row shows of the receipt of the side's counted
// attempt (its first repeat's).
type RowReceipt struct {
	Trial          string            `json:"trial"`
	Attempt        int               `json:"attempt"`
	Outcome        string            `json:"outcome"`
	Pins           map[string]string `json:"pins,omitempty"`
	InputTokens    int               `json:"input_tokens"`
	OutputTokens   int               `json:"output_tokens"`
	WallSeconds    float64           `json:"wall_seconds"`
	PeakMemBytes   int64             `json:"peak_mem_bytes"`
	GovernorEvents []string          `json:"governor_events,omitempty"`
	Detail         string            `json:"detail,omitempty"`
}

// Filter names one filter of the rows matrix.
type Filter string

// The filters the rows matrix offers. Regression, improvement, unchanged
// and missing are read at a gate; the others are properties of the trials.
const (
	FilterAll          Filter = "all"
	FilterRegression   Filter = "regression"
	FilterImprovement  Filter = "improvement"
	FilterDisagreement Filter = "disagreement"
	FilterUnchanged    Filter = "unchanged"
	FilterMissing      Filter = "missing"
	FilterHighCost     Filter = "high_cost"
	FilterToolError    Filter = "tool_error"
	FilterPolicyBlock  Filter = "policy_block"
)

// Filters lists them in the order the page offers them.
var Filters = []Filter{FilterAll, FilterRegression, FilterImprovement, FilterDisagreement, FilterUnchanged, FilterMissing, FilterHighCost, FilterToolError, FilterPolicyBlock}

// Class is a row's change at gate: regression (the baseline passes, the
// challenger does not), improvement, unchanged, or missing when either
// side has no value. The page's script computes the same.
func (k Kind) Class(r Row, gate float64) Filter {
	b, c := k.value(k.Pairs[r.Pair].Baseline, r.Task), k.value(k.Pairs[r.Pair].Challenger, r.Task)
	switch {
	case b == nil || c == nil:
		return FilterMissing
	case *b >= gate && *c < gate:
		return FilterRegression
	case *c >= gate && *b < gate:
		return FilterImprovement
	}
	return FilterUnchanged
}

// Shows says whether the matrix shows r under filter f at gate with the
// free text q, matched case-blind against the task, category and tags.
func (k Kind) Shows(r Row, f Filter, q string, gate float64) bool {
	if q = strings.ToLower(strings.TrimSpace(q)); q != "" {
		hit := strings.Contains(strings.ToLower(r.Task), q) || strings.Contains(strings.ToLower(r.Category), q)
		for _, t := range r.Tags {
			hit = hit || strings.Contains(strings.ToLower(t), q)
		}
		if !hit {
			return false
		}
	}
	split := func(s RowSide) bool { return s.Passed > 0 && s.Passed < s.Repeats }
	switch f {
	case FilterAll, "":
		return true
	case FilterDisagreement:
		return split(r.Baseline) || split(r.Challenger)
	case FilterHighCost:
		return r.HighCost
	case FilterToolError:
		return r.Baseline.ToolError || r.Challenger.ToolError
	case FilterPolicyBlock:
		return r.Baseline.PolicyBlock || r.Challenger.PolicyBlock
	}
	return k.Class(r, gate) == f
}

// value is arm's value on task, nil when it has none.
func (k Kind) value(arm, task string) *float64 {
	s := k.Scores
	if s == nil {
		return nil
	}
	a := slices.Index(s.Arms, arm)
	t, ok := slices.BinarySearch(s.Tasks, task)
	if a < 0 || !ok {
		return nil
	}
	return s.Values[a][t]
}
