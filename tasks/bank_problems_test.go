package tasks

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseBankReportsEveryProblem: a bank with problems on several lines
// and several fields of one line is refused with all of them, each naming
// its line, field and fix, in file order.
func TestParseBankReportsEveryProblem(t *testing.T) {
	text := strings.Join([]string{
		testHeader,
		testTask("a"),
		strings.Replace(strings.Replace(testTask("b"), `"easy"`, `"trivial"`, 1), `"private"`, `"somewhere"`, 1),
		testTask("a"),
		strings.Replace(testTask("c"), `"holdout"`, `"hold_out":true,"holdout"`, 1),
		`{"id": "d",`,
		strings.Replace(testTask("e"), `"job_kind":"qa"`, `"job_kind":"other"`, 1),
	}, "\n") + "\n"
	b, err := ParseBank(strings.NewReader(text), "bank.jsonl")
	if b != nil {
		t.Fatal("a bank with problems was returned, half loaded")
	}
	var be *BankError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want a *BankError", err)
	}
	want := []struct {
		line  int
		field string
	}{{3, "difficulty"}, {3, "source"}, {4, "id"}, {5, "hold_out"}, {6, "task"}, {7, "job_kind"}}
	if be.Count != len(want) || len(be.Problems) != len(want) {
		t.Fatalf("%d problems (%d shown), want %d:\n%v", be.Count, len(be.Problems), len(want), err)
	}
	for i, w := range want {
		p := be.Problems[i]
		if p.Line != w.line || p.Field != w.field || p.Fix == "" {
			t.Errorf("problem %d: line %d field %q fix %q, want line %d field %q and a fix", i, p.Line, p.Field, p.Fix, w.line, w.field)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("bank.jsonl:%d: %s:", w.line, w.field)) {
			t.Errorf("the message does not say bank.jsonl:%d: %s:\n%v", w.line, w.field, err)
		}
	}
	var first *ParseError
	if !errors.As(err, &first) || first.Line != 3 {
		t.Errorf("errors.As finds %v, want the first problem (line 3)", first)
	}
}

// TestParseBankCapsTheReport: a file of thousands of bad lines costs
// MaxReported lines of message and a count, and a long value is quoted by
// its first characters and its length.
func TestParseBankCapsTheReport(t *testing.T) {
	lines := []string{testHeader}
	for i := range 2000 {
		lines = append(lines, strings.Replace(testTask(fmt.Sprint("t", i)), `"easy"`, `"trivial"`, 1))
	}
	long := strings.Repeat("x", 1<<20)
	lines[1] = strings.Replace(testTask("a"), `"id":"a"`, `"id":"`+long+`"`, 1)
	_, err := ParseBank(strings.NewReader(strings.Join(lines, "\n")), "bank.jsonl")
	var be *BankError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want a *BankError", err)
	}
	if be.Count != 2000 || len(be.Problems) != MaxReported {
		t.Errorf("count %d, shown %d; want 2000 and %d", be.Count, len(be.Problems), MaxReported)
	}
	msg := err.Error()
	if n := strings.Count(msg, "\n") + 1; n != MaxReported+1 {
		t.Errorf("%d lines of message, want %d and a count", n, MaxReported+1)
	}
	if !strings.Contains(msg, fmt.Sprintf("%d more problems not shown", 2000-MaxReported)) {
		t.Errorf("the message does not count the rest: %s", msg[strings.LastIndex(msg, "\n")+1:])
	}
	if len(msg) > 64<<10 || !strings.Contains(msg, fmt.Sprintf("(%d bytes)", len(long))) {
		t.Errorf("message of %d bytes; want the long id cut to its first characters and its length", len(msg))
	}
}
