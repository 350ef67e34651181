package run

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// trialOutput is what one trial produced before it is graded and recorded.
type trialOutput struct {
	calls   []runtimes.Result // every kept model call, in order
	text    string            // the answer graded (non-code job kinds)
	files   map[string]string // the repository after the harness (code job kinds)
	aider   *runtimes.AiderResult
	capped  bool
	capHit  string
	harness string
	version string
}

func samplingOf(p studies.Pins) runtimes.Sampling {
	return runtimes.Sampling{Temperature: p.Sampling.Temperature, TopK: p.Sampling.TopK, TopP: p.Sampling.TopP, MinP: p.Sampling.MinP, Seed: int(p.Sampling.Seed)}
}

// harnessCaps are the caps a harness run of the job kind gets in this
// execution: the validation's own in a validation run, else the design's,
// with an auto wall derived from this machine's measured speed.
func (x *trialRunner) harnessCaps(jobKind string) studies.AiderCaps {
	if x.validating {
		return studies.ValidationCaps
	}
	caps := x.design.AiderCapsFor(jobKind)
	if w, ok := x.walls[jobKind]; ok {
		caps.Wall = w.Wall
	}
	return caps
}

// taskRequest is the model call that puts task to arm, in the arm's prompt
// format: one user turn through the model's chat template, or the bank's
// few-shot prefix, the prompt and its answer cue as plain text.
func taskRequest(arm studies.Arm, bank *tasks.Bank, task tasks.Task, callID string, topK int) (runtimes.Request, error) {
	req := runtimes.Request{
		CallID:   callID,
		Sampling: samplingOf(arm.Pins), MaxTokens: arm.Pins.StopCap, TopK: topK,
		Effort: runtimes.Effort{Level: arm.Pins.Effort.Value},
	}
	if arm.Format() != studies.PromptCompletion {
		req.Messages = []runtimes.Message{{Role: "user", Content: task.Input.Prompt}}
		return req, nil
	}
	prompt, ok := bank.Header.CompletionPrompt(task)
	if !ok {
		// The freeze refuses this; a bank changed since would be stale.
		return req, fmt.Errorf("arm %s: prompt_format completion, but bank %s has no completion block", arm.Name, bank.File)
	}
	req.Prompt, req.Stop = prompt, bank.Header.Completion.Stop
	return req, nil
}

// generate runs one trial's model work on a started runtime.
func (x *trialRunner) generate(ctx context.Context, arm studies.Arm, rt runtimes.Runtime, jobKind string, bank *tasks.Bank, task tasks.Task, callID string) (trialOutput, error) {
	out := trialOutput{harness: studies.HarnessOf(arm.Runtime)}
	if out.harness != "aider" {
		req, err := taskRequest(arm, bank, task, callID, x.topK)
		if err != nil {
			return out, err
		}
		res, err := rt.Generate(ctx, req)
		if err != nil {
			return out, err
		}
		out.calls, out.text = []runtimes.Result{res}, res.Text
		out.version = rt.Pins().RuntimeVersion
		return out, nil
	}
	// The code job kind: a scratch repository per trial, Aider pointed at the arm.
	scratch, err := os.MkdirTemp(x.workDir, "task-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(scratch)
	repo := filepath.Join(scratch, "repo")
	if err := tasks.Materialize(ctx, repo, task.Input.Files); err != nil {
		return out, err
	}
	var files []string
	for f := range task.Input.Files {
		files = append(files, f)
	}
	// In a fixed order: the order Aider is given the files is the order of
	// its prompt, which must be the same for every arm and every run.
	sort.Strings(files)
	ar, err := runtimes.RunAider(ctx, runtimes.AiderConfig{
		Binary: x.installed.Aider, Arm: rt, WorkDir: scratch, Sampling: samplingOf(arm.Pins),
		MaxTokens: arm.Pins.StopCap, TopK: x.topK, Caps: runtimes.AiderCaps(x.harnessCaps(jobKind)), NoSandbox: x.env.NoSandbox,
	}, runtimes.AiderTask{Repo: repo, Files: files, Message: task.Input.Prompt, TestCommand: task.Input.TestCommand})
	// Every call the runtime answered is kept, even when the run then failed
	// or was stopped: a later call's fate never erases an earlier answer.
	out.aider = &ar
	out.calls = ar.Calls
	out.capped, out.capHit = ar.Capped, ar.CapHit
	out.version = ar.Version
	if err != nil {
		return out, err
	}
	out.files, err = tasks.RepoState(repo)
	if err != nil {
		return out, err
	}
	if len(ar.Calls) > 0 {
		out.text = ar.Calls[len(ar.Calls)-1].Text
	}
	return out, nil
}

// generationRow is callrow.Row for a call made under an arm's pins.
func generationRow(rowID, arm string, role genrecord.Role, p studies.Pins, k int, r runtimes.Result) genrecord.Row {
	return callrow.Row(rowID, arm, role, callrow.Sampling(samplingOf(p), p.StopCap), k, r)
}

// pinMap flattens an arm's pins for the receipt.
func pinMap(a studies.Arm, rp runtimes.Pins) map[string]string {
	m := map[string]string{
		"quant":              a.Pins.Quant,
		"context":            fmt.Sprint(a.Pins.Context),
		"temperature":        fmt.Sprint(a.Pins.Sampling.Temperature),
		"top_k":              fmt.Sprint(a.Pins.Sampling.TopK),
		"top_p":              fmt.Sprint(a.Pins.Sampling.TopP),
		"min_p":              fmt.Sprint(a.Pins.Sampling.MinP),
		"seed":               fmt.Sprint(a.Pins.Sampling.Seed),
		"stop_cap":           fmt.Sprint(a.Pins.StopCap),
		"runtime_build":      a.Pins.RuntimeBuild,
		"pins_source":        a.PinsSource,
		"model_file":         rp.ModelFile,
		"binary_sha256":      rp.BinarySHA256,
		"build_flags":        rp.BuildFlags,
		"kv_cache_type":      rp.KVCacheType,
		"threads":            fmt.Sprint(rp.Threads),
		"weight_repack":      rp.WeightRepack,
		"prompt_checkpoints": rp.PromptCheckpoints,
		"netns":              rp.Containment.NetNS,
		"libraries_hash":     librariesHash(rp.Libraries),
	}
	if rp.OllamaDigest != "" {
		m["ollama_digest"] = rp.OllamaDigest
	}
	if a.Format() == studies.PromptCompletion {
		// The chat_template the runtime reports was not applied: the
		// prompt went as plain text with the bank's few-shot prefix.
		m["prompt_format"] = studies.PromptCompletion
	}
	// The offload pin as the design holds it, and, on a card, where the
	// runtime said it put the model (it was checked against the pin).
	maps.Copy(m, a.Pins.Offload.PinFields())
	if rp.Load != nil {
		m["load_report"] = rp.Load.String()
	}
	if rp.CPU != nil {
		// The CPU backend that computed (the variant of the processor's
		// level the runtime loaded) and its log line of features.
		m["cpu_backend"] = strings.TrimSpace(rp.CPU.Variant + " " + rp.CPU.Library)
		m["cpu_features"] = strings.Join(rp.CPU.Features, " ")
	}
	if c := rp.Containment; c.Sandboxed {
		// The containment as read back inside the runtime's sandbox: the
		// network (interfaces and routes) and the rest (identity, writable
		// mounts, limits). A receipt is evidence of both.
		m["loopback_only"] = fmt.Sprint(c.LoopbackOnly)
		m["interfaces"] = strings.Join(c.Interfaces, "; ")
		m["routes"] = strings.Join(c.Routes, "; ")
		m["containment"] = c.Confinement.Summary()
	}
	return m
}

func librariesHash(libs map[string]string) string {
	h, err := studies.Hash(libs)
	if err != nil {
		return ""
	}
	return h
}

func receiptTrial(k studies.TrialKey) receipts.TrialKey {
	return receipts.TrialKey{Arm: k.Arm, TaskID: k.Task, Repeat: k.Repeat}
}
