package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/receipts"
	"rig/studies"
	"rig/tasks"
)

// quickDesignMap reads the quick demo study as a JSON tree, its bank named
// by absolute path and the design allowed to live in a temporary folder,
// and its arms at one slot: these tests are of prompt formats, and what
// they hold the answers to was seen one trial at a time (the demo's own
// slot count, pins.slots 4, is TestQuickDemoScript's).
func quickDesignMap(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../examples/quick-study/design.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	bank, _ := filepath.Abs("../tasks/banks/extract-json.jsonl")
	jk := m["job_kinds"].([]any)[0].(map[string]any)
	jk["task_bank"], jk["sample_tasks"] = bank, 2
	// No fidelity step: these tests swap an arm for Gemma, whose tokenizer
	// is not SmolLM2's (the demo's fidelity is TestQuickDemoScript's).
	delete(jk, "reference")
	m["allow_paths_outside"] = true
	for _, a := range m["arms"].([]any) {
		a.(map[string]any)["pins"].(map[string]any)["slots"] = 1
	}
	return m
}

// asGemma turns the quick study's candidate into the provisioned Gemma 3
// 270M, in the prompt format given ("" leaves the default, chat).
func asGemma(m map[string]any, format string) {
	arm := m["arms"].([]any)[1].(map[string]any)
	arm["name"] = "gemma3-llama-server"
	arm["model"] = map[string]any{"registry_name": "Gemma-3-270M", "file": "${GEMMA3_GGUF}"}
	arm["pins"].(map[string]any)["quant"] = "Q4_K_M"
	if format != "" {
		arm["prompt_format"] = format
	}
	for _, it := range m["items"].([]any) {
		if it.(map[string]any)["role"] == "candidate" {
			it.(map[string]any)["name"], it.(map[string]any)["registry_id"] = "Gemma-3-270M", "gemma-3-270m"
		}
	}
}

// freezeMap writes the design and freezes it with the options the daemon's
// register and freeze use (the GGUF's quant and prompt format read, the
// banks through assets); loadErr is what register's LoadDesign said.
func freezeMap(t *testing.T, ctx context.Context, m map[string]any, lookup func(string) (string, bool), assets studies.Assets) (snap *studies.Snapshot, d *studies.Design, loadErr, err error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "design.json")
	b, _ := json.Marshal(m)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := studies.ValidateOptions{File: file, Lookup: lookup, BaseDir: dir, Quant: studies.GGUFQuant, Format: studies.GGUFFormat}
	_, loadErr = studies.LoadDesign(ctx, file, opts)
	d = mustParse(t, m)
	snap, err = studies.Freeze(ctx, studies.FreezeInput{Design: d, Validate: opts}, assets)
	return snap, d, loadErr, err
}

func provisioned(t *testing.T) (provision.Installed, func(string) (string, bool)) {
	t.Helper()
	in, err := provision.Load()
	if err == nil {
		_, err = in.Model("gemma-3-270m")
	}
	if err != nil {
		t.Skipf("needs rig's provisioned runtimes and models (run: make setup): %v", err)
	}
	lookup, err := provision.Lookup()
	if err != nil {
		t.Fatal(err)
	}
	return in, lookup
}

// The provisioned Gemma 3 270M is the pretrained base model: its GGUF has no
// chat template and no instruct tag. Freezing an arm that would put a chat
// template on it is refused, naming the model and the two ways on; the same
// arm in the completion format (the bank's few-shot prefix as plain text)
// freezes.
func TestFreezeRefusesTheBundledGemmaInChatAndTakesItAsACompletion(t *testing.T) {
	in, lookup := provisioned(t)
	ctx := context.Background()
	env := Env{Installed: in}

	chat := quickDesignMap(t)
	asGemma(chat, "")
	_, _, loadErr, err := freezeMap(t, ctx, chat, lookup, env.Assets())
	var ve *studies.ValidationError
	if !errors.As(loadErr, &ve) || !ve.Has(studies.KindBaseModel, "arms[1].model.file") {
		t.Errorf("registering Gemma 3 270M in chat = %v, want a base-model refusal at arms[1].model.file", loadErr)
	}
	if !errors.As(err, &ve) || !ve.Has(studies.KindBaseModel, "arms[1].model.file") {
		t.Fatalf("freezing Gemma 3 270M in chat = %v, want a base-model refusal at arms[1].model.file", err)
	}
	for _, want := range []string{`"Gemma-3-270M"`, "no tokenizer.chat_template", `"prompt_format": "completion"`, "few-shot prefix", "instruction-tuned"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %s:\n%v", want, err)
		}
	}
	if ve.Has(studies.KindBaseModel, "arms[0].model.file") {
		t.Errorf("SmolLM2-135M-Instruct, which carries its chat template, was refused too:\n%v", err)
	}
	t.Logf("refused as: %v", err)

	completion := quickDesignMap(t)
	asGemma(completion, studies.PromptCompletion)
	snap, d, loadErr, err := freezeMap(t, ctx, completion, lookup, env.Assets())
	if loadErr != nil || err != nil {
		t.Fatalf("registering / freezing Gemma 3 270M as a completion: %v / %v", loadErr, err)
	}
	if d.Arms[1].Format() != studies.PromptCompletion || !snap.Banks[0].Completion {
		t.Errorf("frozen arm format %q, bank completion %v; want completion on both", d.Arms[1].Format(), snap.Banks[0].Completion)
	}
	h, _ := studies.DesignHash(d)
	asGemma(chat, studies.PromptChat)
	if hc, _ := studies.DesignHash(mustParse(t, chat)); hc == h {
		t.Error("the prompt format does not change the design hash")
	}
}

func mustParse(t *testing.T, m map[string]any) *studies.Design {
	t.Helper()
	b, _ := json.Marshal(m)
	d, err := studies.ParseDesign("design.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fakeBinaries is a fake: runtime binaries for a freeze whose banks are under
// test, so the test needs no provisioned runtime. Banks and model files go
// through the runner's own resolver.
type fakeBinaries struct{ localAssets }

func (fakeBinaries) Binary(_ context.Context, c string) (studies.Binary, error) {
	return studies.Binary{Component: c, Path: "/fake/" + c, SHA256: strings.Repeat("0", 64)}, nil
}

// Freeze refuses a bank in which two tasks say the same thing once case and
// spacing are set aside (the lint's normalization), naming both, whether or
// not the bank was audited before the audit refused duplicates.
func TestFreezeRefusesAnExactDuplicateTask(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	raw, err := os.ReadFile("../tasks/banks/extract-json.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	var task map[string]any
	if err := json.Unmarshal(lines[1], &task); err != nil {
		t.Fatal(err)
	}
	first := task["id"].(string)
	in := task["input"].(map[string]any)
	in["prompt"] = "  " + strings.ToUpper(strings.ReplaceAll(in["prompt"].(string), " ", "   ")) + "\n"
	task["id"] = "xj-copy-of-" + first
	dup, _ := json.Marshal(task)
	bank := filepath.Join(dir, "extract-json.jsonl")
	if err := os.WriteFile(bank, append(append(bytes.TrimSpace(raw), '\n'), dup...), 0o600); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(model, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := quickDesignMap(t)
	m["job_kinds"].([]any)[0].(map[string]any)["task_bank"] = bank
	lookup := func(string) (string, bool) { return model, true }
	d := mustParse(t, m)
	assets := fakeBinaries{localAssets{graders: tasks.DefaultRegistry(nil), auditDir: studies.BankAuditDir}}
	_, err = studies.Freeze(ctx, studies.FreezeInput{Design: d, Validate: studies.ValidateOptions{Lookup: lookup}}, assets)
	if !errors.Is(err, tasks.ErrDuplicateTask) {
		t.Fatalf("Freeze = %v, want tasks.ErrDuplicateTask", err)
	}
	for _, want := range []string{`"` + first + `" (line 2)`, `"xj-copy-of-` + first + `" (line ` + strconv.Itoa(len(lines)+1) + `)`, "job_kinds[0].task_bank", "extract-json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %s:\n%v", want, err)
		}
	}
	t.Logf("refused as: %v", err)
}

// A completion-format arm runs: Gemma 3 270M gets the bank's few-shot prefix,
// the task's prompt and the answer cue as plain text (no chat turn markers),
// on llama-server, and stops at the bank's stop string with an on-task JSON
// answer rather than running to the cap.
func TestCompletionArmRunsOnLlamaServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real llama-server (drop -short to run it)")
	}
	in, lookup := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m := quickDesignMap(t)
	asGemma(m, studies.PromptCompletion)
	m["name"] = "completion-arm"
	env := Env{Gates: fakeOpenGates{}, Installed: in}
	snap, d, loadErr, err := freezeMap(t, ctx, m, lookup, env.Assets())
	if loadErr != nil || err != nil {
		t.Fatal(loadErr, err)
	}
	dir := t.TempDir()
	st, exec := frozenExecution(t, ctx, dir, d, snap, "frozen for the completion test")
	h := runToEnd(t, ctx, env, Spec{Study: d.Name, Snapshot: snap, Store: st, Exec: exec, Dir: filepath.Join(dir, "executions", exec.ID)})
	if info := h.Info(); info.Status != string(receipts.Done) {
		t.Fatalf("execution ended %s (%s)", info.Status, info.Error)
	}
	b, err := tasks.LoadBank(snap.Banks[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	_, rows, err := genrecord.ReadAll(filepath.Join(h.Info().Records, "generations-gemma3-llama-server.jsonl"))
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d Gemma rows (%v), want 2", len(rows), err)
	}
	capped := 0
	for _, r := range rows {
		if !strings.HasPrefix(r.RenderedPrompt, b.Header.Completion.FewShotPrefix) || !strings.HasSuffix(r.RenderedPrompt, b.Header.Completion.AnswerCue) ||
			strings.Contains(r.RenderedPrompt, "<start_of_turn>") {
			t.Errorf("row %s was not sent as prefix + prompt + cue with no chat markers:\n%q", r.RowID, r.RenderedPrompt)
		}
		if r.StopReason != genrecord.StopEOS {
			capped++
		}
		t.Logf("%s: %q (stop: %s)", r.RowID, r.Text, r.StopReason)
		if !strings.Contains(r.Text, "{") {
			t.Errorf("row %s: %q is not a JSON answer", r.RowID, r.Text)
		}
	}
	if capped == len(rows) {
		t.Errorf("every completion trial ran to the cap")
	}
	counted, err := st.Counted(ctx, exec.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range counted {
		if want := map[string]string{"gemma3-llama-server": "completion"}[r.Arm]; r.Pins["prompt_format"] != want {
			t.Errorf("receipt %s/%s: pins prompt_format %q, want %q", r.Arm, r.TaskID, r.Pins["prompt_format"], want)
		}
	}
}

// taskRequest puts a task to an arm in the arm's prompt format.
func TestTaskRequestFollowsThePromptFormat(t *testing.T) {
	b, err := tasks.LoadBank("../tasks/banks/extract-json.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	task := b.Tasks[0]
	arm := studies.Arm{Name: "a", Pins: studies.Pins{StopCap: 96}}
	chat, err := taskRequest(arm, b, task, "c", 5)
	if err != nil || len(chat.Messages) != 1 || chat.Messages[0].Content != task.Input.Prompt || chat.Prompt != "" || chat.MaxTokens != 96 {
		t.Errorf("chat request %+v (%v), want one user turn with the task's prompt", chat, err)
	}
	arm.PromptFormat = studies.PromptCompletion
	comp, err := taskRequest(arm, b, task, "c", 5)
	want := b.Header.Completion.FewShotPrefix + task.Input.Prompt + b.Header.Completion.AnswerCue
	if err != nil || comp.Prompt != want || len(comp.Messages) != 0 || strings.Join(comp.Stop, "|") != strings.Join(b.Header.Completion.Stop, "|") {
		t.Errorf("completion request %+v (%v), want prefix + prompt + cue with the bank's stop", comp, err)
	}
	plain := *b
	plain.Header.Completion = nil
	if _, err := taskRequest(arm, &plain, task, "c", 5); err == nil {
		t.Error("a completion arm on a bank with no completion block was given a request")
	}
}
