package tasks

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

const completionHeader = `{"schema_version":1,"job_kind":"qa","bank_version":"1","completion":{"few_shot_prefix":"What is 1+1?\nAnswer: 2\n\nWhat is 3+3?\nAnswer: 6\n\n","answer_cue":"\nAnswer:","stop":["\n\n"]}}`

func TestCompletionPrompt(t *testing.T) {
	b := mustParse(t, completionHeader+"\n"+testTask("a"))
	got, ok := b.Header.CompletionPrompt(b.Tasks[0])
	want := "What is 1+1?\nAnswer: 2\n\nWhat is 3+3?\nAnswer: 6\n\nWhat is 2+2?\nAnswer:"
	if !ok || got != want {
		t.Errorf("CompletionPrompt = %q, %v; want %q", got, ok, want)
	}
	if s := b.Header.Completion.Stop; len(s) != 1 || s[0] != "\n\n" {
		t.Errorf("stop = %q", s)
	}
	plain := mustParse(t, testHeader+"\n"+testTask("a"))
	if _, ok := plain.Header.CompletionPrompt(plain.Tasks[0]); ok {
		t.Error("a bank with no completion block gave a completion prompt")
	}
}

func TestCompletionHeaderRefused(t *testing.T) {
	for name, tc := range map[string]struct{ header, field string }{
		"empty prefix":      {`{"schema_version":1,"job_kind":"qa","bank_version":"1","completion":{"few_shot_prefix":" ","answer_cue":"\nA:"}}`, "completion.few_shot_prefix"},
		"no cue":            {`{"schema_version":1,"job_kind":"qa","bank_version":"1","completion":{"few_shot_prefix":"Q: x\nA: y\n\n","answer_cue":""}}`, "completion.answer_cue"},
		"cue not in prefix": {`{"schema_version":1,"job_kind":"qa","bank_version":"1","completion":{"few_shot_prefix":"Q: x\nA: y\n\n","answer_cue":"\nJSON:"}}`, "completion.answer_cue"},
		"unknown field":     {`{"schema_version":1,"job_kind":"qa","bank_version":"1","completion":{"few_shot_prefix":"Q: x\nA: y","answer_cue":"\nA:","shots":3}}`, "shots"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseBank(strings.NewReader(tc.header+"\n"+testTask("a")+"\n"), "bank.jsonl")
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field != tc.field || pe.Line != 1 {
				t.Errorf("ParseBank = %v, want a parse error at bank.jsonl:1 field %s", err, tc.field)
			}
		})
	}
}

// A few-shot prefix that holds a task's own prompt shows a completion-format
// arm that task's answer: the audit refuses it and writes nothing.
func TestAuditRefusesATaskInsideTheFewShotPrefix(t *testing.T) {
	leaky := strings.Replace(completionHeader, `What is 3+3?`, `what is 2 + 2?`, 1)
	file := writeBank(t, leaky, testTask("a"))
	b, err := LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Audit(context.Background(), b, DefaultRegistry(nil), filepath.Join(t.TempDir(), "audits"))
	if !errors.Is(err, ErrLeak) || !strings.Contains(err.Error(), "task(s) a") || !strings.Contains(err.Error(), "few_shot_prefix") {
		t.Errorf("Audit = %v, want a leak naming task a and few_shot_prefix", err)
	}
	clean := writeBank(t, completionHeader, testTask("a"))
	if b, err = LoadBank(clean); err != nil {
		t.Fatal(err)
	}
	if _, err := Audit(context.Background(), b, DefaultRegistry(nil), filepath.Join(t.TempDir(), "audits")); err != nil {
		t.Errorf("Audit of a clean completion bank = %v", err)
	}
}
