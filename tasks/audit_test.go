package tasks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeBank(t *testing.T, lines ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "bank.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestAuditFreezesHash(t *testing.T) {
	file := writeBank(t, testHeader, testTask("a"), strings.Replace(testTask("b"), "2+2", "1+3", 1))
	dir := filepath.Join(t.TempDir(), "audits")
	reg := DefaultRegistry(nil)
	b, err := LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckAudited(b, dir); !errors.Is(err, ErrNotAudited) {
		t.Fatalf("before audit: %v, want ErrNotAudited", err)
	}
	rec, err := Audit(context.Background(), b, reg, dir)
	if err != nil {
		t.Fatal(err)
	}
	if rec.BankHash != b.Hash || len(rec.Results) != 2 || !rec.Results[0].Pass {
		t.Errorf("record %+v", rec)
	}
	if _, err := CheckAudited(b, dir); err != nil {
		t.Errorf("after audit: %v", err)
	}
	// Edit the bank in place: the freeze must refuse it.
	edited := writeBank(t, testHeader, testTask("a"), strings.Replace(testTask("b"), "2+2", "3+1", 1))
	if b2, _ := LoadBank(edited); b2 == nil || b2.Hash == b.Hash {
		t.Fatal("the edit did not change the bank")
	}
	b2, err := LoadBank(edited)
	if err != nil {
		t.Fatal(err)
	}
	_, err = CheckAudited(b2, dir)
	var ae *AuditError
	if !errors.Is(err, ErrBankChanged) || !errors.As(err, &ae) || ae.Recorded != b.Hash {
		t.Errorf("edited bank: %v, want ErrBankChanged naming the audited hash", err)
	}
}

func TestAuditRefusesFailingKey(t *testing.T) {
	bad := strings.Replace(testTask("b"), `"grader":{"name":"exact","version":1}`, `"grader":{"name":"regex","version":1}`, 1)
	bad = strings.Replace(bad, `{"answer":"4"}`, `{"pattern":"^5$","example":"4"}`, 1)
	bad = strings.Replace(bad, "2+2", "1+3", 1)
	file := writeBank(t, testHeader, testTask("a"), bad)
	b, err := LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "audits")
	_, err = Audit(context.Background(), b, DefaultRegistry(nil), dir)
	var ke *KeyFailedError
	if !errors.As(err, &ke) || !errors.Is(err, ErrKeyFailed) || len(ke.Failures) != 1 || ke.Failures[0].TaskID != "b" {
		t.Fatalf("err = %v, want KeyFailedError for b", err)
	}
	if !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error does not name the line: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("audit dir written despite a failing key: %v", err)
	}
}

func TestAuditUnknownGraderWritesNothing(t *testing.T) {
	file := writeBank(t, testHeader, strings.Replace(testTask("a"), `"version":1`, `"version":4`, 1))
	b, err := LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "audits")
	if _, err := Audit(context.Background(), b, DefaultRegistry(nil), dir); !errors.Is(err, ErrUnknownGrader) {
		t.Errorf("err = %v, want ErrUnknownGrader", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Error("audit dir written for an unknown grader")
	}
}

func TestAuditBundledFixTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 96 python test suites")
	}
	requireTools(t)
	b, err := LoadBank("banks/fix-test.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Audit(context.Background(), b, DefaultRegistry(nil), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Tasks != len(b.Tasks) || len(rec.Graders) != 1 || rec.Graders[0] != "code@v1" {
		t.Errorf("record %+v", rec)
	}
}

func TestRunAuditAndLint(t *testing.T) {
	file := writeBank(t, testHeader, testTask("a"), strings.Replace(testTask("b"), "2+2", "1+3", 1))
	dir := t.TempDir()
	var out strings.Builder
	rec, err := RunAudit(context.Background(), &out, file, dir, DefaultRegistry(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), rec.BankHash) {
		t.Errorf("audit output lacks the hash: %s", out.String())
	}
	out.Reset()
	r, err := RunLint(context.Background(), &out, file, DefaultRegistry(nil))
	if err != nil {
		t.Fatal(err)
	}
	if r.Templates != 1 || !strings.Contains(out.String(), "distinct templates 1") {
		t.Errorf("lint output: %s", out.String())
	}
}

// An exact duplicate (the same prompt once case, punctuation and spacing are
// set aside, as the lint normalizes) is one case counted twice: the audit
// refuses the bank naming both tasks and their lines, and writes nothing.
// A near duplicate is kept and listed in the record.
func TestAuditRefusesExactDuplicateAndListsNearOnes(t *testing.T) {
	dup := strings.Replace(testTask("b"), "What is 2+2?", "  what IS 2 + 2 ", 1)
	file := writeBank(t, testHeader, testTask("a"), dup)
	b, err := LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "audits")
	_, err = Audit(context.Background(), b, DefaultRegistry(nil), dir)
	var de *DuplicateTaskError
	if !errors.As(err, &de) || !errors.Is(err, ErrDuplicateTask) {
		t.Fatalf("Audit = %v, want a *DuplicateTaskError", err)
	}
	for _, want := range []string{`task "b" (line 3)`, `task "a" (line 2)`, "bank.jsonl"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("audit dir written despite a duplicate: %v", err)
	}
	if err := CheckDuplicates(b); !errors.Is(err, ErrDuplicateTask) {
		t.Errorf("CheckDuplicates = %v, want ErrDuplicateTask", err)
	}

	long := func(id, tail string) string {
		return strings.Replace(testTask(id), "What is 2+2?", "Please tell me, in one word, what the sum of two and two is, and nothing else at all"+tail, 1)
	}
	file = writeBank(t, testHeader, testTask("a"), long("d", ""), long("e", " please"))
	b, err = LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckDuplicates(b); err != nil {
		t.Errorf("CheckDuplicates on near duplicates only = %v, want nil", err)
	}
	rec, err := Audit(context.Background(), b, DefaultRegistry(nil), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.NearDuplicates) != 1 || rec.NearDuplicates[0].A != "d" || rec.NearDuplicates[0].B != "e" || rec.NearMethod == "" {
		t.Errorf("near duplicates in the record = %v (%q), want d~e with its method", rec.NearDuplicates, rec.NearMethod)
	}
	again, err := CheckAudited(b, dir)
	if err != nil || len(again.NearDuplicates) != 1 {
		t.Errorf("the stored record lost its near duplicates: %v %v", again.NearDuplicates, err)
	}
}
