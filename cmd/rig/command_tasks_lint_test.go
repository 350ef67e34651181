package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/tasks"
)

const extractBank = "extract-json.jsonl"

// bankLines returns the lines of a bundled bank: the header first.
func bankLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(repoFile("tasks", "banks", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

// writeBank writes lines as a bank file in dir and returns its path.
func writeBank(t *testing.T, dir string, lines []string) string {
	t.Helper()
	path := filepath.Join(dir, "bank.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTasksLintBundled(t *testing.T) {
	file := repoFile("tasks", "banks", extractBank)
	b, err := tasks.LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]bool{}
	for _, task := range b.Tasks {
		templates[task.TemplateID] = true
	}
	out, err := runRig(t, "tasks", "lint", file)
	if err != nil {
		t.Fatalf("bundled bank fails lint: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("distinct templates %d", len(templates)); !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

func TestTasksLintRefuses(t *testing.T) {
	lines := bankLines(t, extractBank)[:4]
	failingKey := append([]string(nil), lines...)
	// A key whose own schema says the invoice number is a number cannot pass.
	failingKey[1] = strings.Replace(failingKey[1], `"invoice_number":{"type":"string"}`, `"invoice_number":{"type":"number"}`, 1)
	if failingKey[1] == lines[1] {
		t.Fatal("test edit did not apply; the bundled bank changed shape")
	}
	malformed := append([]string(nil), lines...)
	malformed[2] = `{"id":`
	duplicate := append(append([]string(nil), lines...), lines[3])

	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"failing key", failingKey, "lint found"},
		{"malformed line", malformed, "bank.jsonl:3"},
		{"duplicate id", duplicate, "bank.jsonl:5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeBank(t, t.TempDir(), tt.lines)
			out, err := runRig(t, "tasks", "lint", path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
			if tt.name == "failing key" && !strings.Contains(out, "keys failing their own grader: 1") {
				t.Errorf("output does not count the failing key:\n%s", out)
			}
		})
	}
}
