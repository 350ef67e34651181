package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// KeyingItem is one line of a human keying file. Export fills the item;
// the reviewer fills Pass and/or Score and an optional Note.
type KeyingItem struct {
	Label  string            `json:"label"`
	TaskID string            `json:"task_id"`
	Prompt string            `json:"prompt,omitempty"`
	Text   string            `json:"text"`
	Files  map[string]string `json:"files,omitempty"`
	Pass   *bool             `json:"pass"`
	Score  *float64          `json:"score"`
	Note   string            `json:"note,omitempty"`
}

// HumanKey is a reviewer's keying joined back to its source.
type HumanKey struct {
	BlindEntry
	Pass  *bool    `json:"pass,omitempty"`
	Score *float64 `json:"score,omitempty"`
	Note  string   `json:"note,omitempty"`
}

// ExportBlind writes candidate outputs mixed with incumbent control outputs
// as JSONL for a reviewer, without their source. The bank (may be nil)
// supplies each task's prompt. The returned map is stored apart.
func ExportBlind(w io.Writer, b *Bank, candidates, controls []Output, seed uint64, extra ...string) (BlindMap, error) {
	items, m := blind(candidates, controls, seed, extra)
	ids := m.Identities()
	ids = append(ids, extra...)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, it := range items {
		k := KeyingItem{Label: it.Label, TaskID: it.TaskID, Text: it.Text, Files: it.Files}
		if b != nil {
			if t, ok := b.Task(it.TaskID); ok {
				k.Prompt = t.Input.Prompt
			}
		}
		if err := enc.Encode(k); err != nil {
			return BlindMap{}, err
		}
	}
	// Belt and braces: nothing in the file may name a source.
	if err := AssertNoIdentity(buf.String(), ids); err != nil {
		return BlindMap{}, err
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return BlindMap{}, err
	}
	return m, nil
}

// ImportKeys reads a keyed file back and joins it to the map. Every line
// must carry a known label, once, with pass or score set (score in 0..1).
func ImportKeys(r io.Reader, file string, m BlindMap) ([]HumanKey, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	seen := map[string]int{}
	var keys []HumanKey
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var k KeyingItem
		if err := decodeStrict(raw, &k); err != nil {
			return nil, lineErr(file, line, "item", err, "keep each exported line whole and only fill pass, score and note")
		}
		fail := func(field, msg, fix string) error {
			return &ParseError{File: file, Line: line, Field: field, Msg: msg, Fix: fix}
		}
		e, ok := m.Lookup(k.Label)
		switch {
		case !ok:
			return nil, fail("label", fmt.Sprintf("%q is not in the blinding map", k.Label), "key the file exported with this map; do not edit labels")
		case seen[k.Label] > 0:
			return nil, fail("label", fmt.Sprintf("%q keyed twice (first on line %d)", k.Label, seen[k.Label]), "keep one line per item")
		case k.TaskID != e.TaskID:
			return nil, fail("task_id", fmt.Sprintf("%q differs from the exported %q", k.TaskID, e.TaskID), "do not edit task_id")
		case k.Pass == nil && k.Score == nil:
			return nil, fail("pass", "not keyed", "set pass (true/false) or score (0..1)")
		case k.Score != nil && (*k.Score < 0 || *k.Score > 1):
			return nil, fail("score", fmt.Sprintf("%v is outside 0..1", *k.Score), "use a score between 0 and 1")
		}
		seen[k.Label] = line
		keys = append(keys, HumanKey{BlindEntry: e, Pass: k.Pass, Score: k.Score, Note: k.Note})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(keys) < len(m.Entries) {
		var missing []string
		for _, e := range m.Entries {
			if seen[e.Label] == 0 {
				missing = append(missing, e.Label)
			}
		}
		return nil, fmt.Errorf("%s: %d item(s) not keyed, e.g. %s: %w", file, len(missing), missing[0], errMissingKeys)
	}
	return keys, nil
}

var errMissingKeys = errors.New("key every exported item before importing")
