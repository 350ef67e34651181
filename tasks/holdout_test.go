package tasks

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFlipHoldout(t *testing.T) {
	file := writeBank(t, testHeader, testTask("a"), testTask("b"))
	used := filepath.Join(t.TempDir(), "used.json")
	b, err := FlipHoldout(file, used, []string{"b"}, true)
	if err != nil {
		t.Fatal(err)
	}
	re, err := LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	if tk, _ := re.Task("b"); !tk.Holdout {
		t.Error("flag not written")
	}
	if re.Hash != b.Hash {
		t.Error("returned hash differs from the file's")
	}
	if _, err := FlipHoldout(file, used, []string{"zz"}, true); err == nil {
		t.Error("unknown id accepted")
	}
}

func TestFlipHoldoutLockedWhenUsed(t *testing.T) {
	file := writeBank(t, testHeader, testTask("a"), testTask("b"))
	used := filepath.Join(t.TempDir(), "used.json")
	if err := MarkUsed(used, UsedVersion{JobKind: "qa", BankVersion: "1", Study: "study-7"}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(file)
	_, err := FlipHoldout(file, used, []string{"a"}, true)
	var le *HoldoutLockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrHoldoutLocked) || le.Study != "study-7" {
		t.Fatalf("err = %v, want HoldoutLockedError naming study-7", err)
	}
	after, _ := os.ReadFile(file)
	if !bytes.Equal(before, after) {
		t.Error("bank file changed despite the refusal")
	}
	// Another version of the same job kind is not locked.
	file2 := writeBank(t, `{"schema_version":1,"job_kind":"qa","bank_version":"2"}`, testTask("a"))
	if _, err := FlipHoldout(file2, used, []string{"a"}, true); err != nil {
		t.Errorf("version 2: %v", err)
	}
}

func TestLoadUsedStrict(t *testing.T) {
	used := filepath.Join(t.TempDir(), "used.json")
	if err := os.WriteFile(used, []byte(`{"used":[{"bank_versoin":"1"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadUsed(used); err == nil {
		t.Error("misspelled field accepted")
	}
}
