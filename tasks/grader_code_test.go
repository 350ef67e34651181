package tasks

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func requireTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"python3", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH: %v", tool, err)
		}
	}
}

func TestCodeGrader(t *testing.T) {
	requireTools(t)
	b, err := LoadBank("banks/fix-test.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	task, ok := b.Task("ft-off-by-one-1")
	if !ok {
		t.Fatal("task ft-off-by-one-1 missing")
	}
	g := &Code{Runner: ExecRunner{}, Limit: 20 * time.Second, TempDir: t.TempDir()}
	key, err := g.KeyOutput(task)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"correct fix", key.Files, true},
		{"no change", nil, false},
		{"wrong fix", map[string]string{"series.py": "def sum_to(n):\n    return sum(range(n - 1))\n"}, false},
		{"syntax error", map[string]string{"series.py": "def sum_to(n) return n\n"}, false},
		// Editing the test is not a fix: the test file is restored.
		{"edits the test", map[string]string{"test_series.py": "import unittest\n"}, false},
		{"escaping path ignored", map[string]string{"../x.py": "x", "series.py": key.Files["series.py"]}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gr, err := g.Grade(context.Background(), task, Output{TaskID: task.ID, Files: tc.files})
			if err != nil {
				t.Fatal(err)
			}
			if gr.Pass != tc.want {
				t.Errorf("pass = %v, want %v (details %v)", gr.Pass, tc.want, gr.Details)
			}
			if (gr.Score == 1) != tc.want {
				t.Errorf("score %v disagrees with pass", gr.Score)
			}
		})
	}
	if err := g.CheckBaseline(context.Background(), task); err != nil {
		t.Errorf("baseline: %v", err)
	}
}

func TestCodeGraderTimeCap(t *testing.T) {
	requireTools(t)
	task := Task{
		ID: "loop",
		Input: Input{Prompt: "p", TestCommand: []string{"python3", "-m", "unittest", "-q"}, Files: map[string]string{
			"test_loop.py": "import unittest, subprocess, time\n\nclass T(unittest.TestCase):\n    def test_hang(self):\n        subprocess.Popen(['sleep', '60'])\n        time.sleep(60)\n",
		}},
		Key:    []byte(`{"files":{"x.py":""},"tests":["test_loop.py"]}`),
		Grader: GraderRef{Name: "code", Version: 1},
	}
	g := &Code{Runner: ExecRunner{}, Limit: time.Second, TempDir: t.TempDir()}
	start := time.Now()
	gr, err := g.Grade(context.Background(), task, Output{})
	if err != nil {
		t.Fatal(err)
	}
	if gr.Pass || gr.Details["timed_out"] != true {
		t.Errorf("hung test: %+v, want timed out and not passed", gr)
	}
	// The process group kill must not wait for the orphaned sleep.
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("grade took %v after a 1s cap", el)
	}
}

func TestMaterializeAndRepoState(t *testing.T) {
	requireTools(t)
	dir := t.TempDir()
	files := map[string]string{"a.py": "x = 1\n", "pkg/b.py": "y = 2\n"}
	if err := Materialize(context.Background(), dir, files); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", dir, "log", "--oneline").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "task") {
		t.Errorf("no commit in scratch repo: %s %v", out, err)
	}
	got, err := RepoState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["pkg/b.py"] != "y = 2\n" {
		t.Errorf("RepoState = %v", got)
	}
	if err := Materialize(context.Background(), t.TempDir(), map[string]string{"/etc/x": ""}); err == nil {
		t.Error("absolute path materialized")
	}
}
