package tasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// bankSchemas compiles the published schema: the root (any line) and the
// header and task definitions, which the agreement test holds apart since
// which line is the header is a rule across lines.
func bankSchemas(t *testing.T) (root, header, task *jsonschema.Schema) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(BankSchema()))
	if err != nil {
		t.Fatalf("the bank schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("bank.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	compile := func(ref string) *jsonschema.Schema {
		s, err := c.Compile(ref)
		if err != nil {
			t.Fatalf("compile %s: %v", ref, err)
		}
		return s
	}
	return compile("bank.schema.json"), compile("bank.schema.json#/$defs/header"), compile("bank.schema.json#/$defs/task")
}

func schemaAccepts(s *jsonschema.Schema, line []byte) bool {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	return err == nil && s.Validate(v) == nil
}

// TestBankSchemaAcceptsEveryBank: every line of the bundled banks and of
// the imported fixtures' banks validates against the schema's root.
func TestBankSchemaAcceptsEveryBank(t *testing.T) {
	root, _, _ := bankSchemas(t)
	var texts [][]byte
	for _, name := range []string{"banks/extract-json.jsonl", "banks/fix-test.jsonl"} {
		texts = append(texts, readFile(t, name))
	}
	for _, c := range importCases() {
		b, err := Import(context.Background(), readFixture(t, c.file), c.file, c.o, DefaultRegistry(nil))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := b.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, buf.Bytes())
	}
	n := 0
	for _, text := range texts {
		sc := bufio.NewScanner(bytes.NewReader(text))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !schemaAccepts(root, sc.Bytes()) {
				t.Errorf("the schema refuses a line rig reads: %.200s", sc.Text())
			}
			n++
		}
	}
	if n < 100 {
		t.Fatalf("only %d lines checked", n)
	}
}

// crossField are the values whose rule spans fields or lines, which a
// schema of one line cannot state: a task's job kind equals the header's,
// the answer cue appears in the few-shot prefix. Only their type and
// presence are mutated.
var crossField = map[string]bool{
	"task.job_kind": true, "header.job_kind": true, "header.completion.answer_cue": true, "header.completion.few_shot_prefix": true,
}

// TestBankSchemaAndReaderAgree puts every value of a header (with a
// completion block and an origin), a prompt task and a code task through
// the edits a hand-edited line gets wrong (null, removed, the wrong type,
// empty, blank, out of its set, an unknown key beside it) and holds the
// schema's verdict on that line to ParseBank's on a bank holding it.
func TestBankSchemaAndReaderAgree(t *testing.T) {
	_, header, task := bankSchemas(t)
	xj := strings.SplitN(string(readFile(t, "banks/extract-json.jsonl")), "\n", 3)
	ft := strings.SplitN(string(readFile(t, "banks/fix-test.jsonl")), "\n", 3)
	var h map[string]any
	mustDecode(t, xj[0], &h)
	h["origin"] = map[string]any{"format": "csv", "file": "cases.csv", "sha256": strings.Repeat("ab", 32)}
	hLine := mustEncode(t, h)
	n := 0
	for _, base := range []struct {
		kind   string
		line   string
		schema *jsonschema.Schema
		bank   func(line string) string
	}{
		{"header", hLine, header, func(l string) string { return l + "\n" + xj[1] + "\n" }},
		{"task", xj[1], task, func(l string) string { return hLine + "\n" + l + "\n" }},
		{"task", ft[1], task, func(l string) string { return ft[0] + "\n" + l + "\n" }},
	} {
		var doc map[string]any
		mustDecode(t, base.line, &doc)
		for _, m := range mutations(doc, base.kind) {
			line := mustEncode(t, m.doc)
			sch := !schemaAccepts(base.schema, []byte(line))
			_, err := ParseBank(strings.NewReader(base.bank(line)), "bank.jsonl")
			if rig := err != nil; rig != sch {
				t.Errorf("%s %s: the schema refuses: %v, rig refuses: %v (%v)\n%.300s", base.kind, m.name, sch, rig, err, line)
			}
			n++
		}
	}
	if n < 150 {
		t.Fatalf("only %d mutations", n)
	}
	t.Logf("%d mutations", n)
}

type mutation struct {
	name string
	doc  map[string]any
}

// mutations lists the edited copies of doc, each with one value changed.
func mutations(doc map[string]any, kind string) []mutation {
	var out []mutation
	var walk func(m map[string]any, path string)
	walk = func(m map[string]any, path string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := path + "." + k
			for i, v := range valueEdits(m[k], crossField[p] || strings.HasPrefix(p, "task.key")) {
				out = append(out, mutation{fmt.Sprintf("%s=%d(%.40v)", p, i, v), editAt(doc, m, k, v)})
			}
			out = append(out, mutation{p + " removed", editAt(doc, m, k, removed{})})
			if sub, ok := m[k].(map[string]any); ok && k != "key" && k != "files" {
				walk(sub, p)
			}
		}
		out = append(out, mutation{path + ".bogus added", editAt(doc, m, "bogus", "x")})
	}
	walk(doc, kind)
	return out
}

type removed struct{}

// valueEdits are the wrong values tried in place of v; typeOnly keeps to
// null and the wrong types.
func valueEdits(v any, typeOnly bool) []any {
	edits := []any{nil}
	switch v.(type) {
	case string:
		edits = append(edits, json.Number("17"), []any{"x"})
		if !typeOnly {
			edits = append(edits, "", " ", "x", "public-benchmark:", "easy", "a/b")
		}
	case json.Number:
		edits = append(edits, "1", json.Number("0"), json.Number("-1"), json.Number("1.5"), json.Number("2"), true)
	case bool:
		edits = append(edits, "true", json.Number("1"))
	case []any:
		edits = append(edits, "x", []any{}, []any{json.Number("17")}, []any{""})
	case map[string]any:
		edits = append(edits, "x", map[string]any{}, []any{})
	}
	return edits
}

// editAt copies doc with m[k] (m a map inside doc) set to v, or removed.
func editAt(doc, m map[string]any, k string, v any) map[string]any {
	old, had := m[k]
	if _, ok := v.(removed); ok {
		delete(m, k)
	} else {
		m[k] = v
	}
	c := deepCopy(doc).(map[string]any)
	if had {
		m[k] = old
	} else {
		delete(m, k)
	}
	return c
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = deepCopy(e)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

func mustDecode(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatal(err)
	}
}

func mustEncode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
