package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/internal/provision"
)

// These tests drive the real rig binary, its daemon, the real runtimes and
// the real models, as a user would from a shell.

type rigEnv struct {
	t      *testing.T
	bin    string
	home   string
	daemon *exec.Cmd
}

func buildRig(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rig")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func newRigEnv(t *testing.T) *rigEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: starts the rig daemon and real runtimes (run without -short)")
	}
	if _, err := provision.Load(); err != nil {
		t.Fatal(err)
	}
	e := &rigEnv{t: t, bin: buildRig(t), home: t.TempDir()}
	t.Cleanup(e.stopDaemon)
	return e
}

func (e *rigEnv) env() []string {
	// A private lock per home: these daemons run beside each other and
	// beside a machine's own daemon.
	return append(os.Environ(), "RIG_HOME="+e.home, "RIG_DAEMON_LOCK="+filepath.Join(e.home, "daemon.lock"))
}

// rig runs one CLI command and returns its output; want says whether it must succeed.
func (e *rigEnv) rig(want bool, args ...string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = e.env()
	out, err := cmd.CombinedOutput()
	if want && err != nil {
		e.t.Fatalf("rig %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !want && err == nil {
		e.t.Fatalf("rig %s succeeded, want an error:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

func (e *rigEnv) startDaemon(args ...string) {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"daemon"}, args...)...)
	cmd.Env = e.env()
	logf, err := os.OpenFile(filepath.Join(e.home, "daemon.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.daemon = cmd
	sock := filepath.Join(e.home, "rig.sock")
	for i := 0; i < 100; i++ {
		if c, err := net.DialTimeout("unix", sock, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatal("daemon did not start")
}

func (e *rigEnv) killDaemon() {
	if e.daemon != nil && e.daemon.Process != nil {
		e.daemon.Process.Signal(syscall.SIGKILL)
		e.daemon.Wait()
		e.daemon = nil
	}
}

func (e *rigEnv) stopDaemon() {
	if e.daemon != nil && e.daemon.Process != nil {
		e.daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { e.daemon.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			e.killDaemon()
		}
		e.daemon = nil
	}
}

// demoDesignFor reads the demo design, renamed, with only the named job kind
// (its bank an absolute path, sample tasks taken) and one repeat.
func demoDesignFor(t *testing.T, name, jobKind string, sample int) (design, kind map[string]any) {
	t.Helper()
	d := readDesignMap(t, "../../examples/demo-study/design.json")
	d["name"] = name
	d["repeats"] = 1
	d["allow_paths_outside"] = true // the study folder and the bank's copy are temporary
	bank := bankCopy(t, jobKind)
	for _, k := range d["job_kinds"].([]any) {
		if km := k.(map[string]any); km["name"] == jobKind {
			km["task_bank"] = bank
			km["sample_tasks"] = sample
			kind = km
		}
	}
	if kind == nil {
		t.Fatalf("the demo design has no job kind %s", jobKind)
	}
	d["job_kinds"] = []any{kind}
	return d, kind
}

// bankCopy copies the bundled bank of jobKind and its key audits into a
// temporary folder and returns the copy's path. A study that is decided
// records the bank version it used beside the bank (studies.BankUsedFile):
// on the repository's own bank that write lands in the tree under test,
// where internal/hostile's test, running at the same time, sees the bundled
// banks change.
func bankCopy(t *testing.T, jobKind string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "tasks", "banks")
	audits, err := filepath.Glob(filepath.Join(src, "audits", "audit-*.json"))
	if err != nil || len(audits) == 0 {
		t.Fatalf("the bundled banks have no key audits under %s (%v)", src, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "audits"), 0o755); err != nil {
		t.Fatal(err)
	}
	copies := map[string]string{filepath.Join(src, jobKind+".jsonl"): filepath.Join(dir, jobKind+".jsonl")}
	for _, a := range audits {
		copies[a] = filepath.Join(dir, "audits", filepath.Base(a))
	}
	for from, to := range copies {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, jobKind+".jsonl")
}

// keepItems keeps the design's items whose registry id passes keep.
func keepItems(d map[string]any, keep func(registryID string) bool) {
	var items []any
	for _, it := range d["items"].([]any) {
		if id, _ := it.(map[string]any)["registry_id"].(string); keep(id) {
			items = append(items, it)
		}
	}
	d["items"] = items
}

// smallDesign writes a study of the extract-json job kind (sample tasks taken
// across templates) on the incumbent SmolLM2 (Q4_1) on llama-server and its
// Q8_0 requantization on llama-server, and on Ollama when asked.
func smallDesign(t *testing.T, name string, sample int, withOllama bool) string {
	t.Helper()
	d, _ := demoDesignFor(t, name, "extract-json", sample)
	var arms []any
	for _, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		if rt := am["runtime"].(string); rt == "llama-server" || (withOllama && rt == "ollama") {
			pins := am["pins"].(map[string]any)
			pins["stop_cap"] = 96 // short answers keep the test quick; pins stay equal across arms
			arms = append(arms, am)
		}
	}
	d["arms"] = arms
	keepItems(d, func(id string) bool {
		return id != "aider-chat" && id != "rig-bank-fix-test" && (withOllama || id != "ollama")
	})
	return writeDesignMap(t, d)
}

// ensureGovernorPass runs the fault suite unless a fresh pass is recorded:
// counted runs refuse without one.
func (e *rigEnv) ensureGovernorPass() {
	cmd := exec.Command(e.bin, "governor", "status")
	cmd.Env = e.env()
	if cmd.Run() == nil {
		return
	}
	e.rig(true, "governor", "faults")
}

func (e *rigEnv) prepare(design, name string) {
	e.rig(true, "study", "register", design)
	e.rig(true, "study", "review", name, "--verdict", "pass", "--licence-line", "licences: smollm2-135m-instruct (Apache-2.0) and the rest checked; all items allowed for evaluation and inference")
	e.rig(true, "study", "approve", name)
	e.rig(true, "study", "freeze", name)
	e.rig(true, "study", "preflight", name)
	e.rig(true, "study", "validate", name)
}

func TestStudyEndToEndOnRealRuntimes(t *testing.T) {
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "e2e-extract"
	design := smallDesign(t, name, 12, true)

	// Gates fail closed before their steps have run.
	e.rig(true, "study", "register", design)
	out := e.rig(false, "study", "run", name, "--no-gates")
	if !strings.Contains(out, "gate refused") && !strings.Contains(out, "not frozen") {
		t.Fatalf("run before freeze was not refused clearly:\n%s", out)
	}
	e.rig(true, "study", "review", name, "--verdict", "pass", "--licence-line", "licences: smollm2-135m-instruct (Apache-2.0) and the rest checked; all items allowed for evaluation and inference")
	e.rig(true, "study", "approve", name)
	e.rig(true, "study", "freeze", name)
	out = e.rig(false, "study", "run", name, "--no-gates")
	for _, want := range []string{"no preflight verdict", "no validation run"} {
		if !strings.Contains(out, want) {
			t.Errorf("gate message lacks %q:\n%s", want, out)
		}
	}
	e.rig(true, "study", "preflight", name)
	e.rig(true, "study", "validate", name)

	out = e.rig(true, "study", "run", name)
	m := regexp.MustCompile(`done: (\d+)/(\d+) trials`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("run did not finish every planned trial:\n%s", out)
	}
	check := e.rig(true, "study", "check", name)
	if !strings.Contains(check, "store ok") {
		t.Fatal(check)
	}
	exported := e.rig(true, "receipts", "export", name)
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(exported))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("export line is not JSON: %v", err)
		}
		if r["generation_sha256"] == "" || r["model_digest"] == "" || r["machine"] == "" {
			t.Errorf("receipt lacks evidence: %v", r)
		}
		lines++
	}
	if fmt.Sprint(lines) != m[2] {
		t.Errorf("exported %d receipts, planned %s", lines, m[2])
	}

	// The report with a replayed sample of every record, opened in headless
	// Chromium; the screenshot is kept under the test's output (-artifacts).
	shot := filepath.Join(t.ArtifactDir(), "report.png")
	rep := e.rig(true, "study", "report", name, "--replay-sample", "2", "--screenshot", shot)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Errorf("no screenshot of the report at %s: %v", shot, err)
	}
	html := regexp.MustCompile(`report: (\S+\.html)`).FindStringSubmatch(rep)
	if html == nil {
		t.Fatalf("report path not printed:\n%s", rep)
	}
	page, err := os.ReadFile(html[1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "<svg") || strings.Contains(string(page), `src="http`) {
		t.Error("report is not a self-contained page with figures")
	}
	var repJSON struct {
		ComparisonHash string `json:"comparison_hash"`
		Replay         *struct {
			Rows []struct {
				Record, Arm, Status, Detail string
			} `json:"rows"`
		} `json:"replay"`
	}
	raw, err := os.ReadFile(strings.TrimSuffix(html[1], ".html") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &repJSON); err != nil || len(repJSON.ComparisonHash) != 64 {
		t.Fatalf("no comparison hash in report.json: %v", err)
	}
	if repJSON.Replay == nil {
		t.Fatal("report.json has no replay section after --replay-sample")
	}
	replayed := map[string]int{}
	for _, r := range repJSON.Replay.Rows {
		if r.Status != "reproduced" {
			t.Errorf("replay of %s (%s): %s %s", r.Record, r.Arm, r.Status, r.Detail)
		}
		replayed[r.Arm]++
	}
	for _, arm := range []string{"smollm2-llama-server", "smollm2-q8-llama-server", "smollm2-q8-ollama"} {
		if replayed[arm] != 2 {
			t.Errorf("%d rows of %s replayed in the report, want 2", replayed[arm], arm)
		}
	}
	if !strings.Contains(string(page), repJSON.ComparisonHash) {
		t.Error("the HTML report does not show the comparison hash")
	}
	hash := []string{"", repJSON.ComparisonHash}
	stale := strings.Repeat("0", 64)
	if out := e.rig(false, "study", "decide", name, "--comparison", stale, "--rationale", "test", "--yes"); !strings.Contains(strings.ToLower(out), "stale") {
		t.Errorf("a stale comparison hash was not refused clearly:\n%s", out)
	}
	out = e.rig(true, "study", "decide", name, "--comparison", hash[1], "--rationale", "end-to-end test", "--yes")
	if !strings.Contains(out, "decision") {
		t.Fatal(out)
	}
	if st := e.rig(true, "study", "status", name); !strings.Contains(st, "decided") {
		t.Errorf("study not decided:\n%s", st)
	}

	// Replay the kept outputs of one arm: every row must reproduce exactly.
	recs, _ := filepath.Glob(filepath.Join(e.home, "studies", name, "executions", "exec-1", "generations-smollm2-llama-server.jsonl"))
	if len(recs) != 1 {
		t.Fatalf("generation record missing: %v", recs)
	}
	if out := e.rig(true, "replay", recs[0], "--sample", "5"); !strings.Contains(out, "summary: reproduced") {
		t.Fatalf("replay did not reproduce:\n%s", out)
	}
}

// TestDaemonSurvivesKill9 kills the daemon ten times at random points of a
// real run; afterwards every planned trial has exactly one counted receipt and
// the store's integrity check passes.
func TestDaemonSurvivesKill9(t *testing.T) {
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "crash-extract"
	e.prepare(smallDesign(t, name, 24, false), name)
	e.rig(true, "study", "run", name, "--detach")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for i := 0; i < 10; i++ {
		time.Sleep(time.Duration(500+rng.Intn(2500)) * time.Millisecond)
		e.killDaemon()
		e.startDaemon()
	}
	deadline := time.Now().Add(20 * time.Minute)
	var status string
	for time.Now().Before(deadline) {
		status = e.rig(true, "study", "status", name)
		if regexp.MustCompile(`exec-1 attempt 1: done`).MatchString(status) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	m := regexp.MustCompile(`exec-1 attempt 1: (\w+), (\d+)/(\d+) trials`).FindStringSubmatch(status)
	if m == nil || m[1] != "done" || m[2] != m[3] {
		t.Fatalf("after 10 kills the execution did not finish with every trial counted:\n%s", status)
	}
	check := e.rig(true, "study", "check", name)
	counted := regexp.MustCompile(`\((\d+) counted\)`).FindStringSubmatch(check)
	if counted == nil || counted[1] != m[3] {
		t.Fatalf("counted receipts != planned trials (%s):\n%s", m[3], check)
	}
	// No sandboxed runtime survives the daemon.
	if left := processesNamed(e.home); len(left) > 0 {
		t.Errorf("runtimes left running after the daemon stopped: %v", left)
	}
}

func processesNamed(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) && !strings.Contains(string(b), "rig\x00daemon") {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
