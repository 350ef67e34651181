package main

import (
	"context"
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

// overlongTask is the tutorial's task whose prompt is longer than its pinned
// context (1024 tokens): freeze counts it with each arm's tokenizer and
// refuses the first study, naming it, rather than let a runtime truncate it;
// the second study leaves it out with a reason.
const overlongTask = "ar-fields-1"

// runTutorial runs script (the tutorial's commands) in a fresh folder and
// returns what it printed, and the folder. The tutorial sets its own private
// RIG_HOME and RIG_DAEMON_LOCK; e's home is pointed at it afterwards.
func runTutorial(t *testing.T, e *rigEnv, script string) (string, string, error) {
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
	return strings.ReplaceAll(string(out), work, "$WORK"), work, err
}

// TestTutorialOnRealRuntimes does what a newcomer does: the commands of
// docs/tutorial.md, as written, in a folder outside the repository, with the
// private home and daemon lock the tutorial sets, on the real daemon,
// runtimes and models, with the studio's own licence registry and no file of
// rig's changed. The round trip after a refusal is in it: freeze refuses the
// first study over a task longer than the context (naming the task, its
// token count and the context, and offering exclude_tasks); a register of
// the changed design under the used name is refused as a name taken (never
// as the user's idempotency key), naming withdraw and --name; the first
// study is withdrawn with a reason; the design, with the task excluded with
// its reason, is registered under a new name and goes through to a decision,
// its report listing the excluded task with the reason.
func TestTutorialOnRealRuntimes(t *testing.T) {
	e := newRigEnv(t)
	repoState := gitStatusPorcelain(t)
	const lint = "rig tasks lint arith.jsonl"
	script := tutorialScript(t)
	for _, want := range []string{lint, "rig try design.yaml", "export RIG_HOME=", "export RIG_DAEMON_LOCK=", "export RIG_STATE_DIR=", "exclude_tasks:", "rig study withdraw arith-first-study", "--name arith-second-study"} {
		if !strings.Contains(script, want) {
			t.Fatalf("the tutorial no longer runs %q", want)
		}
	}
	text, work, err := runTutorial(t, e, script)
	t.Logf("the tutorial's commands printed:\n%s", text)
	if err != nil {
		t.Fatalf("the tutorial's commands failed: %v", err)
	}
	for _, want := range []string{
		"from $WORK/arith/licences.json", // the studio's registry was read
		// the try, first: both arms' answers side by side, the pilot figures
		"== arith/ar-apples-1\nprompt  Mia has 3 apples",
		"pilot (a try's few tasks",
		"--from-try try-",
		"validation llama-server",
		"pass=true",
		"decision",
		// freeze's refusal offers leaving the task out
		"exclude_tasks:\n    - {job_kind: arith, task: " + overlongTask + ", why:",
		// register under the used name: the name, and both ways on
		`study "arith-first-study" is registered already`,
		"rig study withdraw arith-first-study --why",
		"--name NEW-NAME",
		// the withdrawn study's status: its state and the whole audit log
		"state      withdrawn",
		"audit log",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the tutorial's output lacks %q", want)
		}
	}
	if strings.Contains(text, "idempotency key") {
		t.Errorf("an idempotency key was reported, though the tutorial gives none:\n%s", text)
	}
	for _, arm := range []string{"smollm2", "smollm2-q8"} {
		if !regexp.MustCompile(`arm ` + arm + `, task ` + overlongTask + `: \d+ prompt tokens \+ stop cap 128 = \d+ > context 1024`).MatchString(text) {
			t.Errorf("freeze's refusal does not name arm %s, the task, its count and the context:\n%s", arm, text)
		}
	}
	if !regexp.MustCompile(`withdraw +approved → withdrawn +by [^;]+; withdrawn by [^;]+; why: ar-fields-1 does not fit`).MatchString(text) {
		t.Error("the first study's audit log does not show its withdrawal from approved, by whom and why")
	}
	if !regexp.MustCompile(`done: (\d+)/(\d+) trials`).MatchString(text) {
		t.Error("the run did not finish")
	}
	// The tutorial's own home: its daemon stopped with its shell.
	e.home = filepath.Join(work, "arith", ".rig-home")
	// Its governor state is private too: the fault suite's pass that let
	// its counted run start was written inside its home, not the machine's.
	if passes, _ := filepath.Glob(filepath.Join(e.home, "state", "governor", "*")); len(passes) == 0 {
		t.Errorf("the tutorial's governor state is not in its private home (%s holds nothing)", filepath.Join(e.home, "state", "governor"))
	}
	e.startDaemon()
	if st := e.rig(true, "study", "status", "arith-second-study"); !strings.Contains(st, "state      decided") || !strings.Contains(st, "decide ") {
		t.Errorf("the second study was not decided, or its audit log lacks the decision:\n%s", st)
	}
	if st := e.rig(true, "study", "status", "arith-first-study"); !strings.Contains(st, "state      withdrawn") {
		t.Errorf("the first study is not withdrawn:\n%s", st)
	}
	reports, _ := filepath.Glob(filepath.Join(e.home, "studies", "arith-second-study", "reports", "*", "report.md"))
	if len(reports) == 0 {
		t.Fatal("no report written")
	}
	md, err := os.ReadFile(reports[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "### Tasks left out by the design") || !strings.Contains(string(md), "- "+overlongTask+": its prompt is longer than the 1024-token context") {
		t.Errorf("the report does not list the excluded task with its reason")
	}
	plans, _ := filepath.Glob(filepath.Join(e.home, "studies", "arith-second-study", "executions", "*", "plan.json"))
	for _, p := range plans {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), overlongTask) {
			t.Errorf("the plan %s runs the excluded task", p)
		}
	}
	if len(plans) == 0 {
		t.Error("no plan found to check the exclusion against")
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
