package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/runtimes"
	"rig/tasks"
)

// TestTasksImportWritesABankLintAndAuditTake: the command converts each
// format's fixture into a bank that rig tasks lint and rig tasks audit take,
// and refuses a bad row naming its line and field, writing nothing.
func TestTasksImportWritesABankLintAndAuditTake(t *testing.T) {
	fixture := func(name string) string { return repoFile("tasks", "testdata", "import", name) }
	for _, c := range []struct {
		file string
		args []string
	}{
		{"inspect.jsonl", []string{"--from", "inspect", "--template-field", "category", "--difficulty-field", "level"}},
		{"promptfooconfig.yaml", []string{"--from", "promptfoo", "--template-field", "topic", "--difficulty-field", "level"}},
		{"lmeval-shape.jsonl", []string{"--from", "lm-eval", "--template-field", "kind", "--difficulty", "easy"}},
		{"cases.csv", []string{"--from", "csv", "--prompt-field", "question", "--target-field", "answer", "--id-field", "id", "--template-field", "template", "--difficulty-field", "difficulty", "--grader", "normalized"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bank.jsonl")
			args := append([]string{"tasks", "import", fixture(c.file), "--job-kind", "imported", "--source", "private", "--out", out}, c.args...)
			if msg, err := runRig(t, args...); err != nil || !strings.Contains(msg, "wrote "+out) {
				t.Fatalf("import: %v\n%s", err, msg)
			}
			if msg, err := runRig(t, "tasks", "lint", out); err != nil {
				t.Errorf("lint of the imported bank: %v\n%s", err, msg)
			}
			if msg, err := runRig(t, "tasks", "audit", out); err != nil || !strings.Contains(msg, "keys pass their graders") {
				t.Errorf("audit of the imported bank: %v\n%s", err, msg)
			}
		})
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "cases.csv")
	if err := os.WriteFile(bad, []byte("id,question,answer\nq1,What is 2+2?,4\nq2,What is 3+3?,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bank.jsonl")
	_, err := runRig(t, "tasks", "import", bad, "--from", "csv", "--prompt-field", "question", "--target-field", "answer", "--template", "sums", "--difficulty", "easy", "--job-kind", "qa", "--source", "private", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "cases.csv:3: answer: is empty") {
		t.Errorf("a row without its answer: %v, want cases.csv:3: answer: is empty", err)
	}
	if _, statErr := os.Stat(out); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("a refused import left %s behind (%v)", out, statErr)
	}
}

// TestTasksLintSaysTheHeaderIsMissing is the first encounter: an
// Inspect dataset given to lint is told, first, that the bank's header is
// missing and how to convert it.
func TestTasksLintSaysTheHeaderIsMissing(t *testing.T) {
	_, err := runRig(t, "tasks", "lint", repoFile("tasks", "testdata", "import", "inspect.jsonl"))
	if err == nil {
		t.Fatal("lint took an Inspect dataset as a bank")
	}
	first := strings.SplitN(err.Error(), "\n", 2)[0]
	if !strings.Contains(first, "inspect.jsonl:1: header: the first line must be the bank's header") || !strings.Contains(first, "rig tasks import FILE --from inspect") {
		t.Errorf("first problem: %s", first)
	}
}

// promptfooQuietEnv turns off everything promptfoo sends off the machine,
// as scripts/test-tools/promptfoo.sh sets it; the tests also run promptfoo
// in a network namespace holding only loopback.
var promptfooQuietEnv = []string{
	"PROMPTFOO_DISABLE_TELEMETRY=1", "PROMPTFOO_DISABLE_UPDATE=1", "PROMPTFOO_DISABLE_SHARING=1",
	"PROMPTFOO_DISABLE_SHARE_EMAIL_REQUEST=1", "PROMPTFOO_DISABLE_REMOTE_GENERATION=1",
	"PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION=1", "PROMPTFOO_DISABLE_RUNTIME_WARNINGS=1",
}

// promptfooEval runs the real `promptfoo eval` on dir/promptfooconfig.yaml
// in a new network namespace with only loopback up, so nothing it does can
// leave the machine. When sock is set, a forwarder inside the namespace
// serves it (a runtime's unix socket) on 127.0.0.1:port. It returns the
// parsed dir/output.json.
func promptfooEval(t *testing.T, dir, sock string, port int) promptfooOutput {
	t.Helper()
	data, err := os.ReadFile(runPromptfooEval(t, dir, sock, port))
	if err != nil {
		t.Fatal(err)
	}
	var o promptfooOutput
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatalf("promptfoo's output.json: %v", err)
	}
	return o
}

// runPromptfooEval is promptfooEval up to the file: it returns the path of
// the output promptfoo wrote.
func runPromptfooEval(t *testing.T, dir, sock string, port int) string {
	t.Helper()
	bin, err := provision.TestTool("PROMPTFOO_BIN")
	testenv.NeedsSetup(t, "promptfoo (npm)", err)
	_, err = exec.LookPath("unshare")
	testenv.NeedsSetup(t, "unshare (Debian util-linux), for a loopback-only network namespace", err)
	forward := filepath.Join(dir, "forward.js")
	if err := os.WriteFile(forward, []byte(`const net = require("net"), fs = require("fs");
const [sock, port, ready] = process.argv.slice(2);
net.createServer(c => { const u = net.connect(sock); c.pipe(u); u.pipe(c); c.on("error", () => u.destroy()); u.on("error", () => c.destroy()); })
  .listen(Number(port), "127.0.0.1", () => fs.writeFileSync(ready, "ok"));
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The forwarder writes to its own log, not to the pipe the test reads,
	// and is stopped when promptfoo ends, so nothing holds the pipe open.
	script := `ip link set lo up || exit 97
fwd=
if [ -n "$RIG_SOCK" ]; then
  node "$RIG_FORWARD" "$RIG_SOCK" "$RIG_PORT" "$RIG_READY" >"$RIG_FORWARD.log" 2>&1 </dev/null &
  fwd=$!
  n=0; while [ ! -e "$RIG_READY" ]; do n=$((n+1)); [ $n -lt 200 ] || { kill $fwd; exit 98; }; sleep 0.05; done
fi
"$@"; rc=$?
[ -z "$fwd" ] || kill $fwd
exit $rc`
	cmd := exec.Command("unshare", "-rn", "sh", "-c", script, "sh", bin, "eval", "-c", "promptfooconfig.yaml",
		"-o", "output.json", "--no-cache", "--no-table", "--no-progress-bar", "--max-concurrency", "1")
	// A kept folder ($RIG_PROMPTFOO_OUT) may hold the last run's files.
	for _, f := range []string{"output.json", "forward.ready"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(), promptfooQuietEnv...)
	cmd.Env = append(cmd.Env, "HOME="+dir, "PROMPTFOO_CONFIG_DIR="+filepath.Join(dir, ".promptfoo"),
		"RIG_SOCK="+sock, fmt.Sprintf("RIG_PORT=%d", port), "RIG_FORWARD="+forward, "RIG_READY="+filepath.Join(dir, "forward.ready"))
	out, err := cmd.CombinedOutput()
	// promptfoo exits 100 when an assertion failed: the tests mean some to.
	if err != nil && cmd.ProcessState.ExitCode() != 100 {
		t.Fatalf("promptfoo eval: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "output.json")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("promptfoo wrote no output: %v\n%s", err, out)
	}
	return path
}

// promptfooOutput is the part of promptfoo's eval output the tests read.
type promptfooOutput struct {
	Results struct {
		Results []struct {
			TestIdx  int  `json:"testIdx"`
			Success  bool `json:"success"`
			Response struct {
				Output string `json:"output"`
			} `json:"response"`
			Error string `json:"error"`
		} `json:"results"`
	} `json:"results"`
}

// importPromptfoo imports dir/promptfooconfig.yaml with rig and returns
// the bank, its tasks in the tests' order.
func importPromptfoo(t *testing.T, dir string) *tasks.Bank {
	t.Helper()
	out := filepath.Join(dir, "bank.jsonl")
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err) // a kept folder's bank from the last run: an import never overwrites
	}
	if msg, err := runRig(t, "tasks", "import", filepath.Join(dir, "promptfooconfig.yaml"), "--from", "promptfoo", "--job-kind", "support",
		"--template-field", "topic", "--difficulty", "easy", "--source", "private", "--out", out); err != nil {
		t.Fatalf("rig tasks import: %v\n%s", err, msg)
	}
	if msg, err := runRig(t, "tasks", "audit", out); err != nil {
		t.Fatalf("rig tasks audit: %v\n%s", err, msg)
	}
	b, err := tasks.LoadBank(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gradeLikePromptfoo holds rig's graders to promptfoo's own on the outputs
// promptfoo got: for every test, the task rig imported passes exactly when
// promptfoo's assertion passed. It returns how many passed.
func gradeLikePromptfoo(t *testing.T, b *tasks.Bank, o promptfooOutput, echo bool) int {
	t.Helper()
	if len(o.Results.Results) != len(b.Tasks) {
		t.Fatalf("promptfoo ran %d tests, rig imported %d", len(o.Results.Results), len(b.Tasks))
	}
	reg := tasks.DefaultRegistry(nil)
	passed := 0
	for _, r := range o.Results.Results {
		task := b.Tasks[r.TestIdx]
		if echo && r.Response.Output != task.Input.Prompt {
			t.Errorf("test %d: promptfoo sent %q, rig rendered %q", r.TestIdx, r.Response.Output, task.Input.Prompt)
		}
		g, err := reg.Grade(context.Background(), task, tasks.Output{TaskID: task.ID, Text: r.Response.Output})
		if err != nil {
			t.Fatal(err)
		}
		if g.Pass != r.Success {
			t.Errorf("test %d (%s, %s) on %q: rig passes %v, promptfoo %v (%s)", r.TestIdx, task.ID, task.Grader, r.Response.Output, g.Pass, r.Success, r.Error)
		}
		if g.Pass {
			passed++
		}
	}
	return passed
}

// promptfooEchoConfig is a real promptfoo config whose provider, echo,
// answers with the prompt it was sent: promptfoo's rendering is then its
// output, and every assertion kind rig imports is graded by promptfoo on a
// known text, some meant to pass and some to fail.
const promptfooEchoConfig = `description: rig import parity (echo)
prompts:
  - "{{ question }}"
providers:
  - echo
tests:
  - vars: {question: "We open at 9 am on Saturdays."}
    assert: [{type: contains, value: "9 am"}]
    metadata: {topic: hours}
  - vars: {question: "We take VISA and Mastercard."}
    assert: [{type: icontains, value: "visa"}]
    metadata: {topic: cards}
  - vars: {question: "We take cash only."}
    assert: [{type: contains, value: "Visa"}]
    metadata: {topic: cash}
  - vars: {question: "Your order is ORD-123456."}
    assert: [{type: regex, value: "ORD-[0-9]{6}"}]
    metadata: {topic: orders, example: "ORD-000001"}
  - vars: {question: "Your order is ORD-12."}
    assert: [{type: regex, value: "ORD-[0-9]{6}"}]
    metadata: {topic: short-order, example: "ORD-000001"}
  - vars: {question: 42}
    assert: [{type: equals, value: "42"}]
    metadata: {topic: numbers}
  - vars: {question: "yes, we do"}
    assert: [{type: equals, value: "yes"}]
    metadata: {topic: shipping}
  - vars: {question: '{"street": "1 Main St", "city": "Springfield"}'}
    assert: [{type: is-json, value: {type: object, required: [street, city]}}]
    metadata: {topic: address, example: '{"street": "x", "city": "y"}'}
  - vars: {question: '{"street": "1 Main St"}'}
    assert: [{type: is-json, value: {type: object, required: [street, city]}}]
    metadata: {topic: partial-address, example: '{"street": "x", "city": "y"}'}
  - vars: {question: "not json"}
    assert: [{type: is-json}]
    metadata: {topic: prose}
`

// TestTasksImportAgreesWithRealPromptfoo: the real promptfoo evaluates a
// config offline (echo provider), and rig imports the same config: the
// prompt promptfoo sent is the prompt rig rendered, and rig's grader for
// each assertion passes exactly the tests promptfoo's passed.
func TestTasksImportAgreesWithRealPromptfoo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "promptfooconfig.yaml"), []byte(promptfooEchoConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	o := promptfooEval(t, dir, "", 0)
	b := importPromptfoo(t, dir)
	if passed := gradeLikePromptfoo(t, b, o, true); passed != 5 {
		t.Errorf("%d tests passed, the config means 5 to", passed)
	}
}

// TestPromptfooEvalOnLlamaServer runs the real promptfoo against rig's
// provisioned llama-server (its OpenAI-compatible /v1, reached on loopback
// inside promptfoo's network namespace), imports the same config, and holds
// rig's grades of the model's answers to promptfoo's. promptfoo's output is
// kept in $RIG_PROMPTFOO_OUT when set (for `rig compare --from promptfoo`).
func TestPromptfooEvalOnLlamaServer(t *testing.T) {
	testenv.Long(t, "starts llama-server and runs promptfoo against it")
	rt := startSmolLlamaServer(t)
	dir := t.TempDir()
	if keep := os.Getenv("RIG_PROMPTFOO_OUT"); keep != "" {
		dir = keep
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port, err := runtimes.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`description: rig import parity (llama-server)
prompts:
  - "Answer in one short sentence. {{ question }}"
providers:
  - id: openai:chat:smollm2-135m-instruct
    config: {apiBaseUrl: "http://127.0.0.1:%d/v1", apiKey: rig-local, temperature: 0, max_tokens: 32}
tests:
  - vars: {question: "What is the capital of France?"}
    assert: [{type: icontains, value: paris}]
    metadata: {topic: france}
  - vars: {question: "What is the capital of Italy?"}
    assert: [{type: icontains, value: rome}]
    metadata: {topic: italy}
  - vars: {question: "What colour is the sky on a clear day?"}
    assert: [{type: icontains, value: blue}]
    metadata: {topic: sky}
  - vars: {question: "How many legs does a spider have?"}
    assert: [{type: regex, value: "\\b(8|eight)\\b"}]
    metadata: {topic: spider, example: "A spider has eight legs."}
`, port)
	if err := os.WriteFile(filepath.Join(dir, "promptfooconfig.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	o := promptfooEval(t, dir, rt.Endpoint(), port)
	for _, r := range o.Results.Results {
		if r.Response.Output == "" {
			t.Fatalf("test %d: llama-server gave promptfoo no answer (%s)", r.TestIdx, r.Error)
		}
	}
	b := importPromptfoo(t, dir)
	t.Logf("%d of %d answers pass (promptfoo and rig agree on each); promptfoo's output: %s", gradeLikePromptfoo(t, b, o, false), len(b.Tasks), filepath.Join(dir, "output.json"))
}

// startSmolLlamaServer starts rig's provisioned llama-server, contained, on
// SmolLM2-135M (context 1024) for a test that drives it from outside, and
// stops it when the test ends.
func startSmolLlamaServer(t *testing.T) runtimes.Runtime {
	t.Helper()
	in, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (installed.env)", err)
	m, ok := in.Models["smollm2-135m-instruct"]
	if !ok {
		testenv.NeedsSetup(t, "the SmolLM2 model", fmt.Errorf("installed.env names no smollm2-135m-instruct: %w", provision.ErrNotProvisioned))
	}
	rt, err := runtimes.Launch(context.Background(), in, "llama-server", runtimes.Config{Model: m.Path, ModelName: "smollm2-135m-instruct", ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatalf("starting llama-server: %v", err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()) })
	return rt
}
