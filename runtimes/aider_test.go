package runtimes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
)

func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(dir, 0o700)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "task"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// TestAiderRunsContainedAgainstTheArm runs the real Aider, in its own
// loopback-only namespace, against a real llama-server arm, and checks that its
// model calls were kept with top-K log-probabilities and the caps applied.
func TestAiderRunsContainedAgainstTheArm(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { aiderAgainst(t, kind) })
	}
}

func aiderAgainst(t *testing.T, kind string) {
	in := provisioned(t)
	t.Setenv("OPENAI_API_KEY", "sk-parent-key-must-not-reach-aider")
	rt := startReal(t, kind, "smollm2-135m-instruct", func(c *Config) { c.Context = 4096 })
	repo := gitRepo(t, map[string]string{
		"calc.py":      "def add(a, b):\n    return a - b\n",
		"test_calc.py": "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
	})
	res, err := RunAider(context.Background(), AiderConfig{
		Binary: in.Aider, Arm: rt, WorkDir: t.TempDir(), Sampling: Sampling{Temperature: 0, Seed: 1},
		MaxTokens: 256, TopK: 5, Caps: AiderCaps{Turns: 2, Wall: 3 * time.Minute, Tokens: 1024},
	}, AiderTask{Repo: repo, Files: []string{"calc.py"}, Message: "Fix add in calc.py so that the test passes."})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("aider: %s\n%s", res.Describe(), res.LogTail)
	if res.Turns == 0 || len(res.Calls) == 0 {
		t.Fatalf("no model call went through the recording proxy: %s", res.LogTail)
	}
	if !res.Containment.Sandboxed || !res.Containment.LoopbackOnly {
		t.Errorf("aider ran without a loopback-only sandbox: %+v", res.Containment)
	}
	if !strings.Contains(res.Version, "0.86.2") {
		t.Errorf("harness version %q, pinned 0.86.2", res.Version)
	}
	c := res.Calls[0]
	if len(c.Steps) == 0 || len(c.Steps[0].Top) != 5 {
		t.Fatalf("Aider's call kept no top-5 log-probabilities: %d steps", len(c.Steps))
	}
	if res.Turns > 2 {
		t.Errorf("turn cap 2 exceeded: %d turns", res.Turns)
	}
	// The call went through the arm's driver: its prompt is what the model's
	// template rendered (a replay re-scores it like any row), not Aider's JSON.
	if c.RenderedPrompt == "" || strings.HasPrefix(strings.TrimSpace(c.RenderedPrompt), "{") {
		t.Errorf("Aider's call kept %.80q, want the rendered prompt", c.RenderedPrompt)
	}
	if kind == "llama-server" && len(c.PromptTokenIDs) == 0 {
		t.Error("Aider's call on llama-server kept no prompt token ids")
	}
	if c.CallID != "aider-call-1" || c.OutputTokens != len(c.Steps) {
		t.Errorf("call %q: %d output tokens, %d log-prob steps", c.CallID, c.OutputTokens, len(c.Steps))
	}
	if strings.Contains(c.RenderedPrompt, "sk-parent-key") {
		t.Error("the parent's key reached the model call")
	}
}

func TestShellJoinQuotesForAShell(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"python3", "-m", "unittest", "-q"}, "python3 -m unittest -q"},
		{[]string{"sh", "-c", "echo it's; rm -rf /"}, `sh -c 'echo it'\''s; rm -rf /'`},
		{[]string{"echo", ""}, "echo ''"},
		{[]string{"a b", "$HOME"}, `'a b' '$HOME'`},
	} {
		got := ShellJoin(c.argv)
		if got != c.want {
			t.Errorf("ShellJoin(%q) = %s, want %s", c.argv, got, c.want)
		}
		out, err := exec.Command("sh", "-c", "printf '%s\\n' "+got).Output()
		if err != nil {
			t.Fatal(err)
		}
		if back := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); strings.Join(back, "\x00") != strings.Join(c.argv, "\x00") {
			t.Errorf("the shell read %q back as %q", got, back)
		}
	}
}

// TestAiderContainsHostileCommands has the real Aider, against a real
// llama-server arm, run a script from its repository (as a model-proposed
// command or test would run) that tries to reach what a contained process
// must not. Every attempt fails inside; the host's files are unchanged.
func TestAiderContainsHostileCommands(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: contained processes run as rig-sandbox only when rig is root")
	}
	in := provisioned(t)
	rt := startReal(t, "llama-server", "smollm2-135m-instruct", func(c *Config) { c.Context = 4096 })
	home := t.TempDir()
	store := filepath.Join(home, "store.db")
	if err := os.WriteFile(store, []byte("receipts"), 0o600); err != nil {
		t.Fatal(err)
	}
	installed := provision.Path()
	before, _ := os.ReadFile(installed)
	script := fmt.Sprintf(`import os, signal
def attempt(what, fn):
    try:
        fn()
        print("ESCAPED", what, flush=True)
    except Exception as e:
        print("BLOCKED", what, type(e).__name__, flush=True)
attempt("write-store", lambda: open(%q, "w").write("gone"))
attempt("read-installed", lambda: open(%q).read())
attempt("list-home", lambda: os.listdir(%q))
attempt("write-usr", lambda: open("/usr/rig-was-here", "w"))
attempt("kill-rig", lambda: os.kill(%d, signal.SIGTERM))
attempt("setuid", lambda: os.setuid(0))
open("inside.txt", "w").write("scratch is writable")
print("DONE", os.getuid(), flush=True)
`, store, installed, home, os.Getpid())
	repo := gitRepo(t, map[string]string{"hostile.py": script})
	work := t.TempDir()
	res, err := RunAider(context.Background(), AiderConfig{
		Binary: in.Aider, Arm: rt, WorkDir: work, Sampling: Sampling{Temperature: 0, Seed: 1},
		MaxTokens: 64, TopK: 5, Caps: AiderCaps{Turns: 1, Wall: 3 * time.Minute, Tokens: 256},
	}, AiderTask{Repo: repo, Message: "/run python3 hostile.py"})
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(work, "aider.log"))
	out := string(log)
	if strings.Contains(out, "ESCAPED") {
		t.Fatalf("an attempt got out of Aider's sandbox:\n%s", out)
	}
	for _, what := range []string{"write-store FileNotFoundError", "read-installed FileNotFoundError", "list-home FileNotFoundError",
		"write-usr OSError", "kill-rig ProcessLookupError", "setuid PermissionError"} {
		if !strings.Contains(out, "BLOCKED "+what) {
			t.Errorf("no %q in Aider's log", "BLOCKED "+what)
		}
	}
	if !strings.Contains(out, "DONE") {
		t.Fatalf("the script did not run to its end inside Aider:\n%s", out)
	}
	if b, _ := os.ReadFile(store); string(b) != "receipts" {
		t.Error("the store changed")
	}
	if after, _ := os.ReadFile(installed); string(after) != string(before) {
		t.Error("installed.env changed")
	}
	if !slices.Contains(res.EditedFiles, "inside.txt") {
		t.Errorf("the write to the scratch repository was not seen from the host: edited %v", res.EditedFiles)
	}
	c := res.Containment.Confinement
	if c == nil || c.UID == 0 || !c.NoNewPrivs || c.Limits.Processes != AiderLimits().Processes {
		t.Errorf("Aider's confinement read back: %+v", c)
	}
}
