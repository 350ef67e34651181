package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testHeader = `{"schema_version":1,"job_kind":"qa","bank_version":"1"}`

func testTask(id string) string {
	return `{"id":"` + id + `","job_kind":"qa","template_id":"t1","difficulty":"easy","input":{"prompt":"What is 2+2?"},"key":{"answer":"4"},"grader":{"name":"exact","version":1},"holdout":false,"source":"private"}`
}

func TestParseBankBundled(t *testing.T) {
	for _, name := range []string{"banks/extract-json.jsonl", "banks/fix-test.jsonl"} {
		t.Run(name, func(t *testing.T) {
			b, err := LoadBank(name)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Tasks) < 40 {
				t.Errorf("%d tasks, want >= 40", len(b.Tasks))
			}
			tpl, diff := map[string]bool{}, map[string]bool{}
			for _, tk := range b.Tasks {
				tpl[tk.TemplateID], diff[tk.Difficulty] = true, true
			}
			if len(tpl) < 10 || len(diff) != 3 {
				t.Errorf("%d templates and %d difficulty levels, want >= 10 and 3", len(tpl), len(diff))
			}
			if len(b.Hash) != 64 {
				t.Errorf("hash %q is not a sha256 hex", b.Hash)
			}
			if err := DefaultRegistry(nil).Validate(b); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
}

func TestParseBankErrors(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		wantLine  int
		wantField string
	}{
		{"malformed line", testHeader + "\n" + testTask("a") + "\n{\"id\": \"b\",\n", 3, "task"},
		{"duplicate id", testHeader + "\n" + testTask("a") + "\n" + testTask("a") + "\n", 3, "id"},
		{"unknown task field", testHeader + "\n" + strings.Replace(testTask("a"), `"holdout"`, `"hold_out":true,"holdout"`, 1) + "\n", 2, "hold_out"},
		{"unknown header field", `{"schema_version":1,"job_kind":"qa","bank_version":"1","extra":1}` + "\n" + testTask("a"), 1, "extra"},
		{"bad schema version", `{"schema_version":2,"job_kind":"qa","bank_version":"1"}` + "\n" + testTask("a"), 1, "schema_version"},
		{"bad difficulty", testHeader + "\n" + strings.Replace(testTask("a"), `"easy"`, `"trivial"`, 1), 2, "difficulty"},
		{"job kind mismatch", testHeader + "\n" + strings.Replace(testTask("a"), `"job_kind":"qa"`, `"job_kind":"other"`, 1), 2, "job_kind"},
		{"missing key", testHeader + "\n" + strings.Replace(testTask("a"), `"key":{"answer":"4"},`, ``, 1), 2, "key"},
		{"bad source", testHeader + "\n" + strings.Replace(testTask("a"), `"private"`, `"public-benchmark:"`, 1), 2, "source"},
		{"wrong type", testHeader + "\n" + strings.Replace(testTask("a"), `"holdout":false`, `"holdout":"no"`, 1), 2, "holdout"},
		{"escaping path", testHeader + "\n" + strings.Replace(testTask("a"), `"prompt":"What is 2+2?"`, `"prompt":"x","files":{"../evil.py":"x"},"test_command":["true"]`, 1), 2, "input.files"},
		{"trailing data", testHeader + "\n" + testTask("a") + " {}\n", 2, "task"},
		{"empty", "\n\n", 1, "header"},
		{"no tasks", testHeader + "\n", 1, "tasks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBank(strings.NewReader(tc.text), "bank.jsonl")
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if pe.Line != tc.wantLine || pe.Field != tc.wantField {
				t.Errorf("got line %d field %q (%v), want line %d field %q", pe.Line, pe.Field, err, tc.wantLine, tc.wantField)
			}
			if !strings.HasPrefix(err.Error(), "bank.jsonl:") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestBankHashIgnoresFormatting(t *testing.T) {
	a, err := ParseBank(strings.NewReader(testHeader+"\n"+testTask("a")+"\n"+testTask("b")+"\n"), "a")
	if err != nil {
		t.Fatal(err)
	}
	// Same content, different layout and key order.
	var v map[string]any
	if err := json.Unmarshal([]byte(testTask("b")), &v); err != nil {
		t.Fatal(err)
	}
	spaced, _ := json.MarshalIndent(v, "", "")
	spaced = bytes.ReplaceAll(spaced, []byte("\n"), []byte(" "))
	b, err := ParseBank(strings.NewReader("\n"+testHeader+"\n\n"+testTask("a")+"\n"+string(spaced)), "b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash {
		t.Errorf("hash differs for the same content: %s vs %s", a.Hash, b.Hash)
	}
	c, err := ParseBank(strings.NewReader(testHeader+"\n"+testTask("a")+"\n"+strings.Replace(testTask("b"), `"4"`, `"5"`, 1)), "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash == a.Hash {
		t.Error("hash unchanged after a key edit")
	}
}

func TestBankEncodeRoundTrip(t *testing.T) {
	b, err := LoadBank("banks/fix-test.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "x.jsonl")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b2, err := LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	if b2.Hash != b.Hash {
		t.Errorf("round trip changed the hash")
	}
	if bytes.Contains(buf.Bytes(), []byte(`\u003c`)) {
		t.Error("canonical form escapes '<'; code in keys should stay readable")
	}
}

func TestSelectHoldout(t *testing.T) {
	b, err := LoadBank("banks/extract-json.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, tk := range b.Tasks {
		if tk.Holdout {
			held++
		}
	}
	if held == 0 {
		t.Fatal("bundled bank has no hold-out tasks")
	}
	if got := len(b.Select(false)); got != len(b.Tasks)-held {
		t.Errorf("Select(false) = %d tasks, want %d", got, len(b.Tasks)-held)
	}
	for _, tk := range b.Select(false) {
		if tk.Holdout {
			t.Errorf("hold-out task %s selected without asking", tk.ID)
		}
	}
	if got := len(b.Select(true)); got != len(b.Tasks) {
		t.Errorf("Select(true) = %d, want %d", got, len(b.Tasks))
	}
}

func TestBundled(t *testing.T) {
	bs, err := Bundled()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, b := range bs {
		kinds[b.Header.JobKind] = true
	}
	if !kinds["extract-json"] || !kinds["fix-test"] {
		t.Errorf("bundled job kinds %v, want extract-json and fix-test", kinds)
	}
}
