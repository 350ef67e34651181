package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tutorialScript reads docs/tutorial.md's sh blocks, in order, into one bash
// script.
func tutorialScript(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/tutorial.md")
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n")
	blocks := 0
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		blocks++
		script.WriteString(m[1])
	}
	if blocks < 6 {
		t.Fatalf("docs/tutorial.md has %d sh blocks; the walk-through lost its commands", blocks)
	}
	return script.String()
}

// overlongTask is a task whose prompt is longer than the tutorial's pinned
// context (1024 tokens): freeze counts it with each arm's tokenizer and
// refuses the study, naming it, rather than let a runtime truncate it.
const overlongTask = "ar-overlong-1"

func overlongTaskLine() string {
	prompt := strings.Repeat("A farmer counts the sheep in the top field, then the sheep in the bottom field, and writes both numbers down. ", 60) +
		"How many fields are there? Answer with the number only."
	b, _ := json.Marshal(map[string]any{"id": overlongTask, "job_kind": "arith", "template_id": "overlong", "difficulty": "hard",
		"input": map[string]any{"prompt": prompt}, "key": map[string]any{"value": 2}, "grader": map[string]any{"name": "numeric", "version": 1},
		"holdout": false, "source": "private"})
	return string(b)
}

// runTutorial runs script (the tutorial's commands) in a fresh folder against
// e's home and returns what it printed.
func runTutorial(t *testing.T, e *rigEnv, script string) (string, error) {
	t.Helper()
	work := t.TempDir()
	path := filepath.Join(work, "tutorial.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Dir = work
	cmd.Env = append(e.env(), "PATH="+filepath.Dir(e.bin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return strings.ReplaceAll(string(out), work, "$WORK"), err
}

// TestTutorialOnRealRuntimes does what a newcomer does: the commands of
// docs/tutorial.md, as written, in a folder outside the repository, on the
// real daemon, runtimes and models, from an empty folder to a recorded
// decision, with the studio's own licence registry and no file of rig's
// changed. Then the same commands up to freeze with one task longer than the
// pinned context: freeze refuses the study, naming the task, its token count
// and the context, and nothing is run.
func TestTutorialOnRealRuntimes(t *testing.T) {
	e := newRigEnv(t)
	repoState := gitStatusPorcelain(t)
	const lint = "rig tasks lint arith.jsonl"
	script := tutorialScript(t)
	if !strings.Contains(script, lint) {
		t.Fatalf("the tutorial no longer runs %q", lint)
	}
	text, err := runTutorial(t, e, script)
	t.Logf("the tutorial's commands printed:\n%s", text)
	if err != nil {
		t.Fatalf("the tutorial's commands failed: %v", err)
	}
	for _, want := range []string{
		"from $WORK/arith/licences.json", // the studio's registry was read
		"validation llama-server",
		"pass=true",
		"decision",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the tutorial's output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`done: (\d+)/(\d+) trials`).MatchString(text) {
		t.Error("the run did not finish")
	}
	name := "arith-first-study"
	e.startDaemon() // the tutorial's own daemon stopped with its shell
	if st := e.rig(true, "study", "status", name); !strings.Contains(st, "decided") {
		t.Errorf("the study was not decided:\n%s", st)
	}
	reports, _ := filepath.Glob(filepath.Join(e.home, "studies", name, "reports", "*", "report.md"))
	if len(reports) == 0 {
		t.Fatal("no report written")
	}
	e.stopDaemon()

	// The over-long task, added before lint: the commands stop at freeze.
	const freeze = "rig study freeze " + "arith-first-study"
	i := strings.Index(script, freeze)
	if i < 0 {
		t.Fatalf("the tutorial no longer runs %q", freeze)
	}
	upToFreeze := script[:i+len(freeze)] + "\n"
	upToFreeze = strings.Replace(upToFreeze, lint, "echo '"+overlongTaskLine()+"' >> arith.jsonl\n"+lint, 1)
	long := newRigEnv(t)
	text, err = runTutorial(t, long, upToFreeze)
	if err == nil {
		t.Fatalf("freeze accepted a task longer than the context:\n%s", text)
	}
	for _, arm := range []string{"smollm2", "gemma3"} {
		if !regexp.MustCompile(`arm ` + arm + `, task ` + overlongTask + `: \d+ prompt tokens \+ stop cap 128 = \d+ > context 1024`).MatchString(text) {
			t.Errorf("freeze's refusal does not name arm %s, the task, its count and the context:\n%s", arm, text)
		}
	}
	long.startDaemon()
	if st := long.rig(true, "study", "status", name); !strings.Contains(st, "approved") || strings.Contains(st, "frozen") {
		t.Errorf("the refused study should stay approved, unfrozen:\n%s", st)
	}
	if after := gitStatusPorcelain(t); after != repoState {
		t.Errorf("following the tutorial changed rig's own tree:\nbefore:\n%s\nafter:\n%s", repoState, after)
	}
}

func gitStatusPorcelain(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", "../..", "status", "--porcelain").Output()
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	return string(out)
}
