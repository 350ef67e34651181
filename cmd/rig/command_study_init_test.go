package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/studies"
)

func TestStudyInit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mine.yaml")
	out, err := runCommand(t, newStudyInitCommand(), path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, path) {
		t.Errorf("output does not name the file: %q", out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := studies.ParseDesign(path, data); err != nil {
		t.Errorf("written design does not parse: %v", err)
	}

	// A second init must refuse and leave the edited file alone.
	if err := os.WriteFile(path, []byte("# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runCommand(t, newStudyInitCommand(), path)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second init: err = %v, want an 'exists' refusal", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "# edited\n" {
		t.Errorf("init overwrote the file: %q", got)
	}
}

func TestStudyInitDefaultPath(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := runCommand(t, newStudyInitCommand()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("design.yaml"); err != nil {
		t.Errorf("default path not written: %v", err)
	}
}

// TestStudyInitSaysWhereTaskBanksResolve: the template's comment on
// task_bank says what the code does (read from the design file's folder),
// and so does init's help.
func TestStudyInitSaysWhereTaskBanksResolve(t *testing.T) {
	tpl := string(studies.ExampleDesign())
	help := newStudyInitCommand().Long
	for _, tc := range []struct{ where, text, want string }{
		{"template", tpl, "A relative task_bank is read from this file's folder"},
		{"help", help, "job_kinds[].task_bank or\nlicence_registry is read from the design file's folder"},
	} {
		if !strings.Contains(tc.text, tc.want) {
			t.Errorf("%s lacks %q", tc.where, tc.want)
		}
		if strings.Contains(tc.text, "relative to where rig runs") {
			t.Errorf("%s still says task_bank is relative to where rig runs", tc.where)
		}
	}
}
