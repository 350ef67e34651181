package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// PromptFit is one task whose rendered prompt and stop cap do not fit an
// arm's pinned context.
type PromptFit struct {
	Arm     string
	Task    string
	Tokens  int
	StopCap int
	Context int
}

func (p PromptFit) String() string {
	return fmt.Sprintf("arm %s, task %s: %d prompt tokens + stop cap %d = %d > context %d", p.Arm, p.Task, p.Tokens, p.StopCap, p.Tokens+p.StopCap, p.Context)
}

// CheckPromptsFit counts every task's prompt, rendered by the chat template
// and tokenized by the model's own tokenizer, for every arm that sends tasks
// to a model directly, and refuses (runtimes.ErrPromptTooLong, naming each
// task, its count and the context) when a prompt and the arm's stop cap do not
// fit the arm's pinned context. It runs at freeze, before anything is written.
//
// One llama-server per model file does the counting (its /apply-template and
// /tokenize, the calls a llama-server arm's generation makes): for an Ollama
// arm that is the same GGUF's tokenizer and template, not Ollama's own
// rendering, so each call checks again with Ollama's count. Aider arms build
// their prompts as they run; their calls are checked as they are made.
func CheckPromptsFit(ctx context.Context, env Env, snap *studies.Snapshot, dir string) ([]PromptFit, error) {
	d, err := snap.DesignValue()
	if err != nil {
		return nil, err
	}
	banks := map[string]*tasks.Bank{}
	left := map[string]bool{} // job kind + "\x00" + task: left out by the design, with a reason
	for _, fb := range snap.Banks {
		for _, x := range fb.Excluded {
			left[x.JobKind+"\x00"+x.Task] = true
		}
		b, err := tasks.LoadBankWith(env.open(), fb.Path)
		if err != nil {
			return nil, err
		}
		banks[fb.JobKind] = b
	}
	build, err := runtimes.BuildOf(env.Installed, "llama-server")
	if err != nil {
		return nil, err
	}
	counters := map[string]*runtimes.LlamaServer{}
	defer func() {
		for _, c := range counters {
			c.Stop(context.Background())
		}
	}()
	var over []PromptFit
	for _, arm := range d.Arms {
		if arm.Runtime.Aider() {
			continue
		}
		fa, ok := snap.Arm(arm.Name)
		if !ok {
			return nil, fmt.Errorf("arm %s is not in the snapshot", arm.Name)
		}
		counter, ok := counters[fa.ModelSHA256]
		if !ok {
			if counter, err = startPromptCounter(ctx, env, build, arm, fa, dir); err != nil {
				return nil, err
			}
			counters[fa.ModelSHA256] = counter
		}
		armOver, err := promptsOverContext(ctx, counter, d, arm, banks, left)
		if err != nil {
			return nil, err
		}
		over = append(over, armOver...)
	}
	if len(over) == 0 {
		return nil, nil
	}
	return over, promptsDoNotFit(d, banks, over)
}

// startPromptCounter starts a small llama-server on the arm's model file,
// only to count prompts with its tokenizer and chat template.
func startPromptCounter(ctx context.Context, env Env, build runtimes.Build, arm studies.Arm, fa studies.FrozenArm, dir string) (*runtimes.LlamaServer, error) {
	work := filepath.Join(dir, "count-"+fa.ModelSHA256[:12])
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	rt, err := build.Start(ctx, runtimes.Config{Model: fa.ModelPath, ModelName: arm.Model.RegistryName, ModelSHA256: fa.ModelSHA256,
		Context: 512, WorkDir: work, NoSandbox: env.NoSandbox})
	if err != nil {
		return nil, fmt.Errorf("starting llama-server to count arm %s's prompts: %w", arm.Name, err)
	}
	ls, isLS := rt.(*runtimes.LlamaServer)
	if !isLS {
		rt.Stop(ctx)
		return nil, fmt.Errorf("counting prompts: the llama-server build started %T", rt)
	}
	return ls, nil
}

// promptsOverContext counts, with counter, the prompt of every task arm runs
// and returns those whose prompt and stop cap exceed the arm's context.
func promptsOverContext(ctx context.Context, counter *runtimes.LlamaServer, d *studies.Design, arm studies.Arm, banks map[string]*tasks.Bank, left map[string]bool) ([]PromptFit, error) {
	var over []PromptFit
	effort := runtimes.EffortRecord{Label: arm.Pins.Effort.Value, Supported: arm.Pins.Effort.Value != ""}
	for _, jk := range d.JobKinds {
		if len(arm.JobKinds) > 0 && !slices.Contains(arm.JobKinds, jk.Name) {
			continue
		}
		b := banks[jk.Name]
		if b == nil {
			continue
		}
		for _, t := range b.Select(true) {
			if left[jk.Name+"\x00"+t.ID] {
				continue
			}
			var ids []int
			var err error
			if p, ok := b.Header.CompletionPrompt(t); ok && arm.Format() == studies.PromptCompletion {
				ids, err = counter.Tokenize(ctx, p) // as a completion arm sends it: no template
			} else {
				_, ids, err = counter.Render(ctx, []runtimes.Message{{Role: "user", Content: t.Input.Prompt}}, effort)
			}
			if err != nil {
				return nil, fmt.Errorf("counting task %s's prompt for arm %s: %w", t.ID, arm.Name, err)
			}
			if len(ids)+arm.Pins.StopCap > arm.Pins.Context {
				over = append(over, PromptFit{Arm: arm.Name, Task: t.ID, Tokens: len(ids), StopCap: arm.Pins.StopCap, Context: arm.Pins.Context})
			}
		}
	}
	return over, nil
}

// promptsDoNotFit is the refusal for the prompts in over, with the
// exclude_tasks entries that would leave them out.
func promptsDoNotFit(d *studies.Design, banks map[string]*tasks.Bank, over []PromptFit) error {
	var lines, exclude []string
	seen := map[string]bool{}
	for _, p := range over {
		if jk := jobKindOf(d, banks, p.Task); !seen[jk+"\x00"+p.Task] {
			seen[jk+"\x00"+p.Task] = true
			exclude = append(exclude, fmt.Sprintf("{job_kind: %s, task: %s, why: \"prompt of %d tokens does not fit arm %s's context of %d\"}", jk, p.Task, p.Tokens, p.Arm, p.Context))
		}
	}
	for i, p := range over {
		if i == 20 {
			lines = append(lines, fmt.Sprintf("… and %d more", len(over)-20))
			break
		}
		lines = append(lines, p.String())
	}
	if len(exclude) > 20 {
		exclude = append(exclude[:20], fmt.Sprintf("… and %d more", len(exclude)-20))
	}
	return fmt.Errorf("%w: %d task prompts do not fit (counted with each arm's model tokenizer and chat template):\n  %s\n"+
		"Either shorten those prompts, lower the stop cap or raise the arm's context; or leave those tasks out with a reason, in the design:\n"+
		"  exclude_tasks:\n    - %s\n"+
		"then register the changed design under a new name (withdraw this study first: rig study withdraw %s --why \"…\")",
		runtimes.ErrPromptTooLong, len(over), strings.Join(lines, "\n  "), strings.Join(exclude, "\n    - "), d.Name)
}

// jobKindOf is the job kind whose bank holds task id, for the exclude_tasks
// line a refusal offers.
func jobKindOf(d *studies.Design, banks map[string]*tasks.Bank, id string) string {
	for _, jk := range d.JobKinds {
		if b := banks[jk.Name]; b != nil {
			for _, t := range b.Tasks {
				if t.ID == id {
					return jk.Name
				}
			}
		}
	}
	return "?"
}
