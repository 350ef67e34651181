package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/tasks"
)

func TestTasksLeakage(t *testing.T) {
	file := repoFile("tasks", "banks", extractBank)
	b, err := tasks.LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	leaked := b.Tasks[0]
	dir := t.TempDir()
	leaky := filepath.Join(dir, "system.txt")
	clean := filepath.Join(dir, "clean.txt")
	if err := os.WriteFile(leaky, []byte("You are a helpful assistant. For example:\n"+leaked.Input.Prompt+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(clean, []byte("You are a careful assistant. Answer in JSON when asked and say when a field is missing."), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		args    []string
		wantIs  error
		wantErr string
		wantOut string
	}{
		{name: "clean place", args: []string{"--bank", file, "--place", "system_prompt=" + clean}, wantOut: "hits: 0"},
		{name: "leaky place", args: []string{"--bank", file, "--place", "system_prompt=" + leaky},
			wantIs: tasks.ErrLeak, wantOut: leaked.ID},
		{name: "bad kind", args: []string{"--bank", file, "--place", "wiki=" + clean}, wantErr: "system_prompt"},
		{name: "no equals", args: []string{"--bank", file, "--place", clean}, wantErr: "KIND=FILE"},
		{name: "no place", args: []string{"--bank", file}, wantErr: "--place"},
		{name: "missing place file", args: []string{"--bank", file, "--place", "retrieval=" + filepath.Join(dir, "absent.md")}, wantErr: "absent.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runRig(t, append([]string{"tasks", "leakage"}, tt.args...)...)
			switch {
			case tt.wantIs != nil:
				if !errors.Is(err, tt.wantIs) {
					t.Errorf("err = %v, want errors.Is %v", err, tt.wantIs)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("unexpected error: %v", err)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("output lacks %q:\n%s", tt.wantOut, out)
			}
		})
	}
}
