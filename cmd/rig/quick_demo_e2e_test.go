package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"rig/report"
	"rig/studies"
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
	checkDemoSlots(t, rep, out)
	checkDemoFidelity(t, rep)
	md, err := os.ReadFile(filepath.Join(filepath.Dir(m[len(m)-1][1]), "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	checkReportReadsAlike(t, rep, string(md), out)
}

// checkDemoSlots: the quick demo runs each arm at the slots its design pins
// (README, "Slots"), and both the report's speed card and the demo's last
// lines say how many.
func checkDemoSlots(t *testing.T, rep report.Data, out string) {
	t.Helper()
	const path = "../../examples/quick-study/design.json"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := studies.ParseDesign(path, raw)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, a := range d.Arms {
		want[a.Name] = a.Pins.SlotCount()
	}
	// The last one: the dry run's note on slots starts "slots:" too.
	lines := regexp.MustCompile(`(?m)^slots: +(.*)$`).FindAllStringSubmatch(out, -1)
	if len(lines) == 0 {
		t.Fatalf("the demo did not print its arms' slots:\n%s", out)
	}
	line := lines[len(lines)-1]
	if len(rep.Kinds[0].Speed) != len(want) {
		t.Errorf("the report has %d speed cards, want one per arm (%d)", len(rep.Kinds[0].Speed), len(want))
	}
	for _, s := range rep.Kinds[0].Speed {
		if got := max(s.Slots, 1); got != want[s.Arm] {
			t.Errorf("arm %s: the report's speed card shows %d slots, the design pins %d", s.Arm, got, want[s.Arm])
		}
		if arm := fmt.Sprintf("%s %d", s.Arm, want[s.Arm]); !strings.Contains(line[1], arm) {
			t.Errorf("the demo's slots line %q does not say %q", line[0], arm)
		}
	}
}

// checkDemoFidelity: the quick demo answers its own question (what the
// smaller quant costs) where 24 tasks of pass rates cannot. Each arm is held
// to the Q8_0 arm (the reference) on the Q8_0 arm's outputs, and the pair's
// difference in mean KL is clear (its interval excludes 0) while the pair's
// difference in pass rate is not.
func checkDemoFidelity(t *testing.T, rep report.Data) {
	t.Helper()
	k := rep.Kinds[0]
	f := k.Fidelity
	if f == nil {
		t.Fatal("the quick demo's report has no fidelity section, though its job kind names a reference arm")
	}
	if f.Reference != "smollm2-q8-llama-server" {
		t.Errorf("fidelity reference %q, want the Q8_0 arm", f.Reference)
	}
	var q4 *report.FidelityArm
	for i, a := range f.Arms {
		if a.Tasks != 24 || a.Tokens == 0 {
			t.Errorf("fidelity arm %s: %d tasks, %d tokens scored; want all 24 tasks", a.Arm, a.Tasks, a.Tokens)
		}
		if a.Arm == "smollm2-llama-server" {
			q4 = &f.Arms[i]
		}
	}
	if q4 == nil {
		t.Fatalf("no fidelity figures for the Q4_1 arm: %+v", f.Arms)
	}
	if q4.MeanKL.Low <= 0 || q4.MeanKL.Value <= 0 {
		t.Errorf("Q4_1's mean KL from Q8_0 is %+v: a smaller quant diverges, so its interval should exclude 0", q4.MeanKL)
	}
	if q4.ScoredBy != "stack" {
		t.Errorf("Q4_1 on llama-server scored by %q, want stack", q4.ScoredBy)
	}
	for _, p := range k.Pairs {
		if p.Delta.Low > 0 || p.Delta.High < 0 {
			t.Logf("pass-rate difference %s vs %s: %+v", p.Challenger, p.Baseline, p.Delta)
			t.Errorf("the pass-rate difference's interval excludes 0 at 24 tasks; the demo's point is that it does not while fidelity's does")
		}
	}
	for _, p := range f.Pairs {
		t.Logf("fidelity pair %s vs %s: mean KL %+v", p.Challenger, p.Baseline, p.MeanKL)
		if p.MeanKL.Low <= 0 && p.MeanKL.High >= 0 {
			t.Errorf("fidelity pair %s vs %s: mean-KL difference %+v includes 0", p.Challenger, p.Baseline, p.MeanKL)
		}
	}
	if len(f.Pairs) == 0 {
		t.Error("the fidelity section pairs no arms")
	}
}
