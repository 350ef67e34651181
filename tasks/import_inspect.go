package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"rig/internal/jsonerr"
)

// inspectSample is one sample of an Inspect AI dataset (its Sample type).
// sandbox, files and setup prepare a container rig does not build: a
// sample carrying them is refused by name rather than run without them.
type inspectSample struct {
	Input    json.RawMessage            `json:"input"`
	Choices  []string                   `json:"choices"`
	Target   json.RawMessage            `json:"target"`
	ID       json.RawMessage            `json:"id"`
	Metadata map[string]json.RawMessage `json:"metadata"`
	Sandbox  json.RawMessage            `json:"sandbox"`
	Files    json.RawMessage            `json:"files"`
	Setup    json.RawMessage            `json:"setup"`
}

// inspect reads Inspect samples: JSONL (one a line) or one JSON array.
func (im *importer) inspect(data []byte) []importRow {
	var rows []importRow
	eachJSONRow(data, im, "sample", func(line int, raw []byte) {
		var s inspectSample
		if err := decodeStrict(raw, &s); err != nil {
			im.errs.add(lineErr(im.file, line, "sample", err, "an Inspect sample has input, target, choices, id and metadata"))
			return
		}
		if r, ok := im.inspectRow(line, s); ok {
			rows = append(rows, r)
		}
	})
	return rows
}

// eachJSONRow calls row for every JSON value of a JSONL file, or of a JSON
// array when the file starts with '[', with the line the value starts on.
func eachJSONRow(data []byte, im *importer, what string, row func(line int, raw []byte)) {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		dec := json.NewDecoder(bytes.NewReader(data))
		if _, err := dec.Token(); err != nil {
			im.errs.add(&ParseError{File: im.file, Line: 1, Field: what, Msg: "malformed JSON: " + jsonerr.Message(err), Fix: "give a JSON array of objects, or one object a line"})
			return
		}
		for dec.More() {
			var raw json.RawMessage
			start := dec.InputOffset()
			if err := dec.Decode(&raw); err != nil {
				im.errs.add(&ParseError{File: im.file, Line: lineOf(data, dec.InputOffset()), Field: what, Msg: "malformed JSON: " + jsonerr.Message(err), Fix: "give a JSON array of objects"})
				return
			}
			row(lineOf(data, start+int64(len(data[start:])-len(bytes.TrimLeft(data[start:], " \t\r\n,")))), raw)
		}
		return
	}
	for i, l := range bytes.Split(data, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if i == 0 {
			l = bytes.TrimPrefix(l, []byte("\ufeff"))
		}
		if len(l) > 0 {
			row(i+1, l)
		}
	}
}

func (im *importer) inspectRow(line int, s inspectSample) (importRow, bool) {
	r := importRow{line: line}
	ok := true
	bad := func(field, msg, fix string) { im.fail(&r, field, msg, fix); ok = false }
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"sandbox", s.Sandbox}, {"files", s.Files}, {"setup", s.Setup}} {
		if len(f.raw) > 0 && string(f.raw) != "null" {
			bad(f.name, "prepares a sandbox rig does not build", "import samples that need only their input; put files in a code bank (docs/tasks.md)")
		}
	}
	if len(s.ID) > 0 && string(s.ID) != "null" {
		id, isScalar := scalarString(s.ID)
		if !isScalar {
			bad("id", "is not a string or a number", "give each sample a string or integer id, or leave id out to derive one")
		}
		r.id = id
	}
	prompt, msg := inspectInput(s.Input)
	if msg != "" {
		bad("input", msg, "give input as a string or a list of chat messages (system messages, then one user message)")
	}
	targets, msg := stringOrList(s.Target)
	if msg != "" {
		bad("target", msg, "every sample needs its answer: a string or a list of accepted strings")
	}
	if len(s.Choices) > 0 && msg == "" {
		prompt, targets, msg = multipleChoice(prompt, s.Choices, targets)
		if msg != "" {
			bad("target", msg, "with choices, the target is the letter of the correct choice (A, B, …)")
		}
	}
	r.prompt = prompt
	if ok {
		var err error
		if r.grader, r.key, err = im.o.answerKey(targets); err != nil {
			bad("target", err.Error(), "")
		}
	}
	r.field = func(name string) (string, bool) { return scalarString(s.Metadata[name]) }
	return r, ok
}

// inspectInput is a sample's prompt: a string, or chat messages of which
// system ones come first and one user message ends the list (rig sends one
// prompt, so a conversation with assistant turns cannot be carried over).
func inspectInput(raw json.RawMessage) (string, string) {
	if s, ok := scalarString(raw); ok {
		return s, ""
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return "", "is not a string or a list of chat messages"
	}
	var parts []string
	for i, m := range msgs {
		text, msg := messageText(m.Content)
		if msg != "" {
			return "", fmt.Sprintf("[%d].content %s", i, msg)
		}
		last := i == len(msgs)-1
		switch {
		case m.Role == "system" && !last:
		case m.Role == "user" && last:
		default:
			return "", fmt.Sprintf("[%d].role is %s: rig sends one prompt (system messages, then one user message)", i, jsonerr.Quote(m.Role))
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, "\n\n"), ""
}

// messageText is a chat message's text: a string, or content parts of which
// all are text (an image or audio part cannot go in a text prompt).
func messageText(raw json.RawMessage) (string, string) {
	if s, ok := scalarString(raw); ok {
		return s, ""
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", "is not a string or a list of content parts"
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Sprintf("has a %s part: rig's prompts are text", jsonerr.Quote(p.Type))
		}
		b.WriteString(p.Text)
	}
	return b.String(), ""
}

// stringOrList reads a target: a string or a list of strings (numbers as
// written), at least one of them not blank.
func stringOrList(raw json.RawMessage) ([]string, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "is missing"
	}
	if s, ok := scalarString(raw); ok {
		if strings.TrimSpace(s) == "" {
			return nil, "is empty"
		}
		return []string{s}, ""
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, "is not a string or a list of strings"
	}
	var out []string
	for _, item := range list {
		s, ok := scalarString(item)
		if !ok {
			return nil, "holds a value that is not a string"
		}
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, "is empty"
	}
	return out, ""
}

// multipleChoice writes the choices under the question, lettered as
// Inspect's multiple_choice solver letters them, and checks the target
// names one of them. The answer is the letter alone.
func multipleChoice(question string, choices, targets []string) (string, []string, string) {
	if len(choices) > 26 {
		return "", nil, fmt.Sprintf("%d choices: at most 26 can be lettered", len(choices))
	}
	if len(targets) != 1 {
		return "", nil, fmt.Sprintf("%d targets: rig's key has one correct choice", len(targets))
	}
	letter := strings.ToUpper(strings.TrimSpace(targets[0]))
	if len(letter) != 1 || letter[0] < 'A' || int(letter[0]-'A') >= len(choices) {
		return "", nil, fmt.Sprintf("%s is not the letter of one of the %d choices", jsonerr.Quote(targets[0]), len(choices))
	}
	var b strings.Builder
	b.WriteString(question)
	b.WriteString("\n\n")
	for i, c := range choices {
		fmt.Fprintf(&b, "%c) %s\n", 'A'+i, c)
	}
	b.WriteString("\nAnswer with the letter of the correct choice only.")
	return b.String(), []string{letter}, ""
}
