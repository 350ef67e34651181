package main

import (
	"encoding/json"
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

// A bank's test commands are the bank's own code: lint runs them as graders
// do, inside the loopback-only sandbox. The key here passes only where the
// process sees no network interface but loopback, which is read from
// /proc/net/dev (per network namespace) and never by sending anything.
func TestTasksLintRunsBankCommandsInTheSandbox(t *testing.T) {
	lines := bankLines(t, "fix-test.jsonl")
	task := map[string]any{
		"id": "ft-sandboxed-1", "job_kind": "fix-test", "template_id": "sandboxed", "difficulty": "easy",
		"input": map[string]any{
			"prompt":       "Make the test pass.",
			"files":        map[string]string{"netcheck.py": "OK = False\n", "test_netcheck.py": "import unittest\n\nimport netcheck\n\n\nclass T(unittest.TestCase):\n    def test_only_loopback(self):\n        with open('/proc/net/dev') as f:\n            names = [l.split(':')[0].strip() for l in f.readlines()[2:]]\n        self.assertEqual(names, ['lo'])\n        self.assertTrue(netcheck.OK)\n"},
			"test_command": []string{"python3", "-m", "unittest", "-q"},
		},
		"key":    map[string]any{"files": map[string]string{"netcheck.py": "OK = True\n"}, "tests": []string{"test_netcheck.py"}},
		"grader": map[string]any{"name": "code", "version": 1}, "holdout": false, "source": "private",
	}
	b, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	bank := writeBank(t, t.TempDir(), []string{lines[0], string(b)})
	if out, err := runRig(t, "tasks", "lint", bank); err != nil {
		t.Fatalf("inside the sandbox the key should pass (only lo is visible): %v\n%s", err, out)
	}
	host, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(host), ":") <= 1 {
		t.Skip("this host has no network interface but loopback, so the unsandboxed half cannot tell the difference")
	}
	if out, err := runRig(t, "tasks", "lint", "--no-sandbox", bank); err == nil {
		t.Fatalf("with --no-sandbox the command saw the host's interfaces, yet the key passed:\n%s", out)
	}
}
