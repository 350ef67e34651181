package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"rig/report"
)

// `make demo` as a newcomer runs it: scripts/demo.sh on the quick study,
// in a fresh home, goes through every stage in order and prints where the
// report is. (The full study's stages are TestDemoDesignValidatesWhileACoreIsBusy
// and the study tests; make demo-full runs it whole.)
func TestQuickDemoScript(t *testing.T) {
	e := newRigEnv(t)
	e.ensureGovernorPass()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/demo.sh")
	cmd.Env = append(e.env(), "RIG_DEMO_HOME="+e.home, "RIG_DEMO_BIN="+e.bin)
	start := time.Now()
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	if err != nil {
		t.Fatalf("scripts/demo.sh: %v\n%s", err, out)
	}
	t.Logf("the quick demo took %s", time.Since(start).Round(time.Second))
	at := 0
	for _, step := range []string{"runtimes", "governor", "starting a private daemon", "workspace (rig ui)", "register", "outside review", "freeze",
		"fit preflight", "one free validation run", "dry run", "counted run", "report"} {
		i := strings.Index(out[at:], "] "+step)
		if i < 0 {
			t.Fatalf("no step %q after the ones before it:\n%s", step, out)
		}
		at += i
	}
	for _, want := range []string{`(?m)^  candidate: SmolLM2-135M-Instruct-Q8_0 .*allowed`, `(?m)^verdict: fits`, `validation llama-server +arm \S+ +pass=true`,
		`\] done: 48/48 trials`, `(?m)^decision: `, `(?m)^screenshot: .*every figure present`,
		`(?m)^workspace: http://127\.0\.0\.1:\d+/\?token=\S+$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the demo printed nothing matching %s", want)
		}
	}
	m := regexp.MustCompile(`(?m)^report: +(\S+\.html)$`).FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		t.Fatalf("the demo did not print its report's path:\n%s", out)
	}
	if _, err := os.Stat(m[len(m)-1][1]); err != nil {
		t.Errorf("the report it printed: %v", err)
	}
	// The demo compares arms that can do the task: SmolLM2-135M-Instruct as
	// shipped (Q4_1) against its Q8_0 requantization, each passing some tasks
	// and none with every trial at the stop cap (a base model in chat format
	// repeats the prompt to the cap and passes nothing).
	rawJSON, err := os.ReadFile(filepath.Join(filepath.Dir(m[len(m)-1][1]), "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Data
	if err := json.Unmarshal(rawJSON, &rep); err != nil || len(rep.Kinds) != 1 {
		t.Fatalf("report.json: %v, %d job kinds, want 1", err, len(rep.Kinds))
	}
	var names []string
	for _, a := range rep.Kinds[0].Arms {
		names = append(names, a.Arm)
		if a.Trials == 0 || a.Capped == a.Trials || a.PassRate == 0 {
			t.Errorf("arm %s: %d of %d trials capped, pass rate %.3f: it did not do the task", a.Arm, a.Capped, a.Trials, a.PassRate)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "smollm2-llama-server,smollm2-q8-llama-server" {
		t.Errorf("the quick demo compared %v, want SmolLM2 at Q4_1 and at Q8_0", names)
	}
	md, err := os.ReadFile(filepath.Join(filepath.Dir(m[len(m)-1][1]), "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	checkReportReadsAlike(t, rep, string(md), out)
}
