package harnesslog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// promptfooOutput is the part of `promptfoo eval --output FILE.json` rig
// reads: one result per provider × prompt × test.
type promptfooOutput struct {
	Results *struct {
		Results []promptfooResult `json:"results"`
	} `json:"results"`
}

type promptfooResult struct {
	Provider *struct {
		ID    string `json:"id"`
		Label string `json:"label"`
	} `json:"provider"`
	TestIdx   *int `json:"testIdx"`
	PromptIdx int  `json:"promptIdx"`
	// Prompt is the prompt's template; promptIdx counts prompt ×
	// provider columns, so two providers of one prompt differ there and
	// agree here.
	Prompt *struct {
		Label string `json:"label"`
		Raw   string `json:"raw"`
	} `json:"prompt"`
	NamedScores map[string]float64 `json:"namedScores"`
	Success     *bool              `json:"success"`
	Score       *float64           `json:"score"`
	Error       string             `json:"error"`
	// FailureReason 2 is promptfoo's "error": the provider failed, so the
	// test was not graded.
	FailureReason int `json:"failureReason"`
}

func readPromptfoo(path string) ([]Log, error) {
	data, err := readCapped(path)
	if err != nil {
		return nil, err
	}
	return ParsePromptfoo(data, path)
}

// ParsePromptfoo reads a promptfoo output file into one log per provider
// (its label, else its id). Each test is a sample (test-N, its index) of
// the task named by its prompt's label (the template), with the metrics
// pass (success), score and each named score; a result the provider failed
// to give is left out.
func ParsePromptfoo(data []byte, file string) ([]Log, error) {
	var out promptfooOutput
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, &FieldError{File: file, Field: "output", Msg: fmt.Sprintf("not JSON (%v); pass the file `promptfoo eval --output FILE.json` wrote", err)}
	}
	if out.Results == nil {
		return nil, &FieldError{File: file, Field: "results", Msg: "missing: not a promptfoo output file"}
	}
	by := map[string]*Log{}
	for i, r := range out.Results.Results {
		bad := func(field, msg string) error {
			return &FieldError{File: file, Field: fmt.Sprintf("results.results[%d].%s", i, field), Msg: msg}
		}
		if r.Provider == nil || (r.Provider.ID == "" && r.Provider.Label == "") {
			return nil, bad("provider", "missing (each result names its provider)")
		}
		if r.TestIdx == nil {
			return nil, bad("testIdx", "missing (each result names its test)")
		}
		name := r.Provider.Label
		if name == "" {
			name = r.Provider.ID
		}
		l, ok := by[name]
		if !ok {
			l = &Log{Format: Promptfoo, Source: file, Model: name}
			by[name] = l
		}
		if r.FailureReason == 2 || r.Success == nil {
			continue
		}
		s := Sample{Task: promptTask(r), ID: fmt.Sprintf("test-%d", *r.TestIdx), Repeat: 1, Metrics: map[string]float64{}}
		for k, v := range r.NamedScores {
			s.Metrics["named:"+k] = v
		}
		s.Metrics["pass"] = 0
		if *r.Success {
			s.Metrics["pass"] = 1
		}
		if r.Score != nil {
			s.Metrics["score"] = *r.Score
		}
		l.Samples = append(l.Samples, s)
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	logs := make([]Log, 0, len(names))
	for _, n := range names {
		logs = append(logs, *by[n])
	}
	return logs, nil
}

// promptTask names a result's prompt: its label (the template), shortened
// with a hash of the whole when long; the prompt's index when it has none.
func promptTask(r promptfooResult) string {
	if r.Prompt == nil || r.Prompt.Label == "" {
		return fmt.Sprintf("prompt-%d", r.PromptIdx)
	}
	l := strings.Join(strings.Fields(r.Prompt.Label), " ")
	if len(l) <= 48 {
		return l
	}
	h := sha256.Sum256([]byte(r.Prompt.Label))
	return l[:40] + "…" + hex.EncodeToString(h[:4])
}
