package fidelity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rig/internal/atomicfile"
	"rig/runtimes"
)

// ErrNoScorer says the fidelity scorer is not provisioned.
var ErrNoScorer = errors.New("the fidelity scorer is not available")

// Scorer runs rig-prefill-score's fidelity modes in rig's sandbox, one
// process per call, in a scratch folder under Work.
type Scorer struct {
	// Bin is rig-prefill-score (installed.env's PREFILL_SCORER_BIN).
	Bin string
	// Threads is how many threads a pass runs on.
	Threads int
	// Work is where each call's scratch folder goes.
	Work string
	// NoSandbox runs the scorer uncontained (rig's --no-sandbox).
	NoSandbox bool
	// Watch, when set, puts each scorer process under the caller's watch
	// from its start (a study's runner: the governor's): when preempted
	// closes, the process is stopped and the call fails with ErrPreempted;
	// end ends the watch.
	Watch func(ctx context.Context, sb *runtimes.Sandbox) (preempted <-chan struct{}, end func(), err error)
}

// ErrPreempted says the caller's watch stopped a scorer process: nothing
// it measured is kept, and the call may be tried again.
var ErrPreempted = errors.New("the scorer was preempted")

// Tokenize cuts the text at path with model's tokenizer, as llama-perplexity
// does (special tokens added, none parsed from the text).
func (s Scorer) Tokenize(ctx context.Context, model, path string) (Tokenized, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return Tokenized{}, err
	}
	t, err := s.tokenize(ctx, model, text)
	if err != nil {
		return Tokenized{}, fmt.Errorf("tokenizing %s with %s: %w", path, model, err)
	}
	return t, nil
}

func (s Scorer) tokenize(ctx context.Context, model string, text []byte) (Tokenized, error) {
	var t Tokenized
	err := s.run(ctx, "tokenize", []string{model}, map[string][]byte{"text.txt": text}, []string{"tokenize", model, "@text.txt", "@tokens.out"},
		func(out io.Reader) error {
			var err error
			t, err = parseTokenized(out)
			return err
		}, "tokens.out")
	return t, err
}

// Run holds what one pass of the kl mode measured and what it ran on.
type Run struct {
	Tokens     [][]Token // per segment, in order
	SystemInfo string
	// Busy is the scorer's time past loading both models.
	Busy Busy
}

// Score runs segs through reference and arm in one contained process, both
// models loaded, at context nctx, and returns each scored token. Callers
// check the tokenizers first (SameTokenizer).
func (s Scorer) Score(ctx context.Context, reference, arm string, nctx int, segs []Segment) (Run, error) {
	var b strings.Builder
	for i, sg := range segs {
		if sg.Context < 1 || sg.Scored() < 1 {
			return Run{}, fmt.Errorf("%s: scores no token (%d tokens, context %d)", sg.Unit, len(sg.Tokens), sg.Context)
		}
		if len(sg.Tokens) > nctx {
			return Run{}, fmt.Errorf("%s: %d tokens are past the context of %d (raise --ctx)", sg.Unit, len(sg.Tokens), nctx)
		}
		fmt.Fprintf(&b, "seg %s %d", segID(i), sg.Context)
		for _, t := range sg.Tokens {
			b.WriteByte(' ')
			b.WriteString(strconv.Itoa(t))
		}
		b.WriteByte('\n')
	}
	var r Run
	err := s.run(ctx, "kl", []string{reference, arm}, map[string][]byte{"segments.in": []byte(b.String())},
		[]string{"kl", reference, arm, strconv.Itoa(nctx), strconv.Itoa(max(s.Threads, 1)), "@segments.in", "@scores.out"},
		func(out io.Reader) error {
			h, toks, err := parseScores(out, segs)
			r.Tokens, r.SystemInfo, r.Busy = toks, h.SystemInfo, h.Busy
			return err
		}, "scores.out")
	if err != nil {
		return Run{}, fmt.Errorf("scoring %s against %s: %w", arm, reference, err)
	}
	return r, nil
}

// run starts the scorer on args (an "@name" is that file in the scratch
// folder) with inputs written there first, waits for it and hands its
// output file to read. The models are shown to it read-only.
func (s Scorer) run(ctx context.Context, mode string, models []string, inputs map[string][]byte, args []string, read func(io.Reader) error, output string) error {
	if s.Bin == "" {
		return fmt.Errorf("%w: installed.env names no PREFILL_SCORER_BIN (run make setup: it builds rig-prefill-score from the pinned llama.cpp)", ErrNoScorer)
	}
	if err := os.MkdirAll(s.Work, 0o700); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(s.Work, "fidelity-"+mode+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, data := range inputs {
		if err := atomicfile.WriteBytes(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	argv := []string{s.Bin}
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "@"); ok {
			a = filepath.Join(dir, name)
		}
		argv = append(argv, a)
	}
	env, err := runtimes.BuildEnv(dir, nil)
	if err != nil {
		return err
	}
	sb, err := runtimes.StartSandbox(ctx, runtimes.SandboxSpec{Argv: argv, Env: env, Dir: dir, ReadOnly: models,
		Limits: runtimes.RuntimeLimits(), NoSandbox: s.NoSandbox}, filepath.Join(s.Work, "rig-prefill-score-"+mode+".log"))
	if err != nil {
		return err
	}
	var preempted <-chan struct{}
	if s.Watch != nil {
		var end func()
		if preempted, end, err = s.Watch(ctx, sb); err != nil {
			sb.Stop(5 * time.Second)
			return err
		}
		defer end()
	}
	select {
	case <-sb.Done():
	case <-preempted:
		sb.Stop(5 * time.Second)
		return fmt.Errorf("rig-prefill-score %s: %w", mode, ErrPreempted)
	case <-ctx.Done():
		sb.Stop(5 * time.Second)
		return ctx.Err()
	}
	if err := sb.ExitError(); err != nil {
		return fmt.Errorf("rig-prefill-score %s failed: %v (its log: %s)", mode, err, sb.LogTail(5))
	}
	// The folder was the contained process's to write: the answer is
	// opened without following a link it may have left in its place.
	f, err := os.OpenFile(filepath.Join(dir, output), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("rig-prefill-score %s left no answer: %w (its log: %s)", mode, err, sb.LogTail(5))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("rig-prefill-score %s: its answer %s is not a plain file", mode, output)
	}
	return read(f)
}

// Generate times decoding segs' scored tokens one step each through model
// after their context in one call, as generation runs them (sampling
// aside), on the same library and threads as Score: what `rig bench
// fidelity` divides the measure's time by. It returns the time spent past
// loading.
func (s Scorer) Generate(ctx context.Context, model string, nctx int, segs []Segment) (Busy, error) {
	var b strings.Builder
	for i, sg := range segs {
		fmt.Fprintf(&b, "seg %s %d", segID(i), sg.Context)
		for _, t := range sg.Tokens {
			b.WriteByte(' ')
			b.WriteString(strconv.Itoa(t))
		}
		b.WriteByte('\n')
	}
	var busy Busy
	err := s.run(ctx, "gen", []string{model}, map[string][]byte{"segments.in": []byte(b.String())},
		[]string{"gen", model, strconv.Itoa(nctx), strconv.Itoa(max(s.Threads, 1)), "@segments.in", "@gen.out"},
		func(out io.Reader) error {
			var err error
			busy, err = parseGenerated(out, segs)
			return err
		}, "gen.out")
	if err != nil {
		return Busy{}, fmt.Errorf("generating %s's tokens: %w", model, err)
	}
	return busy, nil
}
