package main

import (
	"bufio"
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
// context (1024 tokens): the runtime refuses it, and the execution must go
// on, report it and still reach a decision.
const overlongTask = "ar-overlong-1"

func overlongTaskLine() string {
	prompt := strings.Repeat("A farmer counts the sheep in the top field, then the sheep in the bottom field, and writes both numbers down. ", 60) +
		"How many fields are there? Answer with the number only."
	b, _ := json.Marshal(map[string]any{"id": overlongTask, "job_kind": "arith", "template_id": "overlong", "difficulty": "hard",
		"input": map[string]any{"prompt": prompt}, "key": map[string]any{"value": 2}, "grader": map[string]any{"name": "numeric", "version": 1},
		"holdout": false, "source": "private"})
	return string(b)
}

// TestTutorialOnRealRuntimes does what a newcomer does: the commands of
// docs/tutorial.md, as written, in a folder outside the repository, on the
// real daemon, runtimes and models, from an empty folder to a recorded
// decision, with the studio's own licence registry and no file of rig's
// changed. One task of the bank is longer than the pinned context: the
// execution still finishes, gives that trial an error receipt, and the
// report names the task that produced no output.
func TestTutorialOnRealRuntimes(t *testing.T) {
	e := newRigEnv(t)
	repoState := gitStatusPorcelain(t)
	work := t.TempDir()
	// The one line the test adds, before lint and audit: an over-long task.
	const lint = "rig tasks lint arith.jsonl"
	script := tutorialScript(t)
	if !strings.Contains(script, lint) {
		t.Fatalf("the tutorial no longer runs %q", lint)
	}
	script = strings.Replace(script, lint, "echo '"+overlongTaskLine()+"' >> arith.jsonl\n"+lint, 1)
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
	t.Logf("the tutorial's commands printed:\n%s", out)
	if err != nil {
		t.Fatalf("the tutorial's commands failed: %v", err)
	}
	text := string(out)
	for _, want := range []string{
		"from " + filepath.Join(work, "arith", "licences.json"), // the studio's registry was read
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

	// The over-long task: an error receipt for each arm, with the runtime's
	// reason, and never a score.
	errs := 0
	sc := bufio.NewScanner(strings.NewReader(e.rig(true, "receipts", "export", name)))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r struct {
			TaskID  string          `json:"task_id"`
			Outcome string          `json:"outcome"`
			Detail  string          `json:"detail"`
			Grade   json.RawMessage `json:"grade"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.TaskID == overlongTask {
			errs++
			if r.Outcome != "error" || !strings.Contains(r.Detail, "not scored") || (len(r.Grade) > 0 && string(r.Grade) != "null") {
				t.Errorf("the over-long task's receipt: outcome %s, detail %q, grade %s; want an ungraded error with its reason", r.Outcome, r.Detail, r.Grade)
			}
		}
	}
	if errs != 2 {
		t.Errorf("%d receipts for the over-long task, want one error per arm", errs)
	}
	reports, _ := filepath.Glob(filepath.Join(e.home, "studies", name, "reports", "*", "report.md"))
	if len(reports) == 0 {
		t.Fatal("no report written")
	}
	md, err := os.ReadFile(reports[len(reports)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), overlongTask) {
		t.Errorf("the report does not name %s, which produced no output", overlongTask)
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
