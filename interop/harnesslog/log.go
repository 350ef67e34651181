package harnesslog

import (
	"fmt"
	"os"
	"sort"
)

// Format is a harness whose per-sample logs rig reads.
type Format string

// The formats.
const (
	LMEval    Format = "lm-eval"
	Inspect   Format = "inspect"
	Promptfoo Format = "promptfoo"
)

// ParseFormat reads a --from value.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case LMEval, Inspect, Promptfoo:
		return Format(s), nil
	}
	return "", fmt.Errorf("--from %q: not a format rig reads (use lm-eval, inspect or promptfoo)", s)
}

// Sample is one graded item of a harness's log: a task's item (its id and,
// where the harness repeats items, the repeat) and its metric values.
type Sample struct {
	Task   string
	ID     string
	Repeat int
	// Metrics are the item's numeric metric values by name.
	Metrics map[string]float64
	// Hash identifies the item's content where the harness records one
	// (lm-eval's doc_hash): two logs pair an item only when they agree.
	Hash string
}

// key pairs a sample with the other log's.
func (s Sample) key() string { return fmt.Sprintf("%s\x00%s\x00%d", s.Task, s.ID, s.Repeat) }

// Log is one model's (or provider's) per-sample results.
type Log struct {
	Format Format
	// Source is the file or folder the log was read from.
	Source string
	// Model names what produced the log, as the harness recorded it.
	Model   string
	Samples []Sample
}

// Read reads the logs at path in format: one log, except for a promptfoo
// output, which holds one per provider.
func Read(format Format, path string) ([]Log, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	var logs []Log
	var err error
	switch format {
	case LMEval:
		var l Log
		l, err = readLMEval(path)
		logs = []Log{l}
	case Inspect:
		var l Log
		l, err = readInspect(path)
		logs = []Log{l}
	case Promptfoo:
		logs, err = readPromptfoo(path)
	default:
		_, err = ParseFormat(string(format))
	}
	if err != nil {
		return nil, err
	}
	for i := range logs {
		sort.Slice(logs[i].Samples, func(a, b int) bool { return logs[i].Samples[a].key() < logs[i].Samples[b].key() })
		if len(logs[i].Samples) == 0 {
			return nil, fmt.Errorf("%s: no graded samples (is it a %s per-sample log?)", logs[i].Source, format)
		}
	}
	return logs, nil
}

// FieldError is a line of a harness's file that rig cannot read: the file,
// the line (0 when the file is one document), the field and the fix.
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Field, e.Msg)
}
