package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/runtimes"
)

// Replay modes. Exact re-runs the kept tokens through the runtime one decode
// step at a time (llama-server, forced by a grammar) or regenerates them
// (Ollama): equality is the goal. Prefill scores prompt + kept tokens in one
// batched forward pass through libllama, the pinned server's own library:
// a fraction of the cost, and a tolerance check, since a batched pass is not
// bit-identical to step-by-step decoding.
const (
	ModeExact   = "exact"
	ModePrefill = "prefill"
)

// ErrNoPrefill says why a record cannot be replayed in prefill mode.
var ErrNoPrefill = errors.New("prefill replay is not available")

// prefillScorer is rig-prefill-score running in its sandbox: one model
// load, one batched pass per row, over two FIFOs in its scratch folder.
type prefillScorer struct {
	sb      *runtimes.Sandbox
	in      *os.File
	out     *bufio.Reader
	outFile *os.File
	bin     string
	binSHA  string
	sysInfo string
	nctx    int
	nvocab  int
	// promptBatch is the prompt's physical batch (llama-server's), and
	// outputBatch the output tokens per call, below the CPU flash-attention
	// tile as decode steps run.
	promptBatch, outputBatch int
	threads                  int
	// repack is "on" or "off": whether the CPU backend repacked the weights,
	// as the server it scores for did (runtimes.Config.WeightRepack).
	repack  string
	timeout time.Duration
}

// scorerThreads is how many threads the scorer runs on: every core rig may
// use, not only the record's threads pin. Its batched pass gives the same
// log-probs at any thread count (docs/generations.md), so the count is its
// speed alone; the exact path keeps the pin.
func scorerThreads(pinned int) int { return max(pinned, goruntime.NumCPU()) }

// startPrefillScorer starts the scorer on model with the context, KV cache
// type and weight repacking of the server p (the one replaying the record),
// on scorerThreads, contained as the runtimes are.
func startPrefillScorer(ctx context.Context, in provision.Installed, model string, p runtimes.Pins, work string, noSandbox bool) (*prefillScorer, error) {
	threads := scorerThreads(p.Threads)
	if p.WeightRepack != "on" && p.WeightRepack != "off" {
		return nil, fmt.Errorf("prefill scorer: the server's pins say no weight repacking (%q), so the scorer cannot run its kernels", p.WeightRepack)
	}
	if in.PrefillScorer == "" {
		return nil, fmt.Errorf("%w: installed.env names no PREFILL_SCORER_BIN (run make setup: it builds rig-prefill-score from the pinned llama.cpp)", ErrNoPrefill)
	}
	sha, err := runtimes.FileSHA256(in.PrefillScorer)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(work, "prefill")
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	fifoIn, fifoOut := filepath.Join(dir, "in.fifo"), filepath.Join(dir, "out.fifo")
	for _, f := range []string{fifoIn, fifoOut} {
		os.Remove(f)
		if err := syscall.Mkfifo(f, 0o666); err != nil {
			return nil, fmt.Errorf("prefill scorer: %w", err)
		}
		// The contained scorer runs as its own user.
		if err := os.Chmod(f, 0o666); err != nil {
			return nil, err
		}
	}
	env, err := runtimes.BuildEnv(dir, nil)
	if err != nil {
		return nil, err
	}
	s := &prefillScorer{bin: in.PrefillScorer, binSHA: sha, threads: threads, timeout: 10 * time.Minute}
	// O_RDWR opens a FIFO without waiting for the other end. Both are opened
	// before the scorer starts: once it runs it may write dir, and a FIFO it
	// swapped for a link would have rig write wherever that pointed.
	if s.in, err = os.OpenFile(fifoIn, os.O_RDWR, 0); err != nil {
		return nil, err
	}
	if s.outFile, err = os.OpenFile(fifoOut, os.O_RDWR, 0); err != nil {
		s.in.Close()
		return nil, err
	}
	argv := []string{in.PrefillScorer, model, strconv.Itoa(p.Context), strconv.Itoa(threads), p.KVCacheType, p.WeightRepack, fifoIn, fifoOut}
	sb, err := runtimes.StartSandbox(ctx, runtimes.SandboxSpec{Argv: argv, Env: env, Dir: dir, ReadOnly: []string{model},
		Limits: runtimes.RuntimeLimits(), NoSandbox: noSandbox}, runtimes.LogPath(dir, "rig-prefill-score"))
	if err != nil {
		s.in.Close()
		s.outFile.Close()
		return nil, err
	}
	s.sb = sb
	s.out = bufio.NewReaderSize(s.outFile, 1<<20)
	line, err := s.readLine(2 * time.Minute)
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("prefill scorer did not load %s: %w (its log: %s)", model, err, sb.LogTail(5))
	}
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "ready" {
		s.Stop()
		return nil, fmt.Errorf("prefill scorer: unexpected first line %q", line)
	}
	s.nctx, _ = strconv.Atoi(f[1])
	s.nvocab, _ = strconv.Atoi(f[2])
	s.promptBatch, _ = strconv.Atoi(f[3])
	s.outputBatch, _ = strconv.Atoi(f[4])
	s.repack = f[5]
	s.sysInfo = strings.Join(f[6:], " ")
	if s.repack != p.WeightRepack {
		s.Stop()
		return nil, fmt.Errorf("prefill scorer: asked for weight repacking %s, it loaded with %s (%s)", p.WeightRepack, s.repack, in.PrefillScorer)
	}
	return s, nil
}

// readLine reads one line, or fails when the scorer dies or takes longer
// than limit.
func (s *prefillScorer) readLine(limit time.Duration) (string, error) {
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := s.out.ReadString('\n')
		ch <- res{strings.TrimRight(l, "\n"), err}
	}()
	select {
	case r := <-ch:
		return r.line, r.err
	case <-s.sb.Done():
		return "", fmt.Errorf("the scorer exited: %v (%s)", s.sb.ExitError(), s.sb.LogTail(5))
	case <-time.After(limit):
		return "", fmt.Errorf("the scorer gave no answer within %s", limit)
	}
}

// Stop ends the scorer.
func (s *prefillScorer) Stop() {
	if s.in != nil {
		fmt.Fprintln(s.in, "quit")
		s.in.Close()
	}
	s.sb.Stop(5 * time.Second)
	if s.outFile != nil {
		s.outFile.Close()
	}
}

// libraries are the shared libraries the running scorer mapped, by sha256.
func (s *prefillScorer) libraries() (map[string]string, error) {
	return runtimes.LoadedLibraries(s.sb.RuntimePID)
}

// score runs one row's prompt and kept tokens in one batched pass.
func (s *prefillScorer) score(rowID string, k int, prompt, output []int) ([]genrecord.Step, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("row %s keeps no prompt token ids: prefill needs them (replay it with --mode exact)", rowID)
	}
	if n := len(prompt) + len(output); n > s.nctx {
		return nil, fmt.Errorf("row %s: %d prompt and %d output tokens are past the scorer's context of %d (refused; replay it with --mode exact)", rowID, len(prompt), len(output), s.nctx)
	}
	id := strings.Map(func(r rune) rune {
		if r <= ' ' {
			return '_'
		}
		return r
	}, rowID)
	var b strings.Builder
	fmt.Fprintf(&b, "score %s %d %d %d", id, k, len(prompt), len(output))
	for _, t := range append(append([]int(nil), prompt...), output...) {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(t))
	}
	b.WriteByte('\n')
	if _, err := s.in.WriteString(b.String()); err != nil {
		return nil, err
	}
	head, err := s.readLine(s.timeout)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(head)
	if len(f) >= 2 && f[0] == "error" {
		return nil, fmt.Errorf("prefill scorer, row %s: %s", rowID, strings.Join(f[2:], " "))
	}
	if len(f) != 3 || f[0] != "row" || f[1] != id {
		return nil, fmt.Errorf("prefill scorer, row %s: unexpected answer %q", rowID, head)
	}
	n, _ := strconv.Atoi(f[2])
	steps := make([]genrecord.Step, 0, n)
	for i := 0; i < n; i++ {
		line, err := s.readLine(s.timeout)
		if err != nil {
			return nil, err
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("prefill scorer, row %s step %d: %q", rowID, i, line)
		}
		lp, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, err
		}
		tok := output[i]
		st := genrecord.Step{ID: &tok, Logprob: &lp}
		for _, pair := range f[2:] {
			a, b, ok := strings.Cut(pair, ":")
			if !ok {
				return nil, fmt.Errorf("prefill scorer, row %s step %d: %q", rowID, i, pair)
			}
			aid, err1 := strconv.Atoi(a)
			alp, err2 := strconv.ParseFloat(b, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("prefill scorer, row %s step %d: %q", rowID, i, pair)
			}
			st.Top = append(st.Top, genrecord.Alt{ID: &aid, Logprob: alp})
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// prefillRescorer scores rows with the scorer and keeps the pinned server
// up for what the stack is (its pins) and for the tokenizer checks of the
// kept fields. The scorer must map the very library files the server does.
type prefillRescorer struct {
	rescorer
	scorer *prefillScorer
}

func (p prefillRescorer) Stack(ctx context.Context) (genrecord.Pins, error) {
	pins, err := p.rescorer.Stack(ctx)
	if err != nil {
		return pins, err
	}
	libs, err := p.scorer.libraries()
	if err != nil {
		return pins, err
	}
	// Every library the scorer computes with must be the file the server
	// loaded; a scorer on another build reads as a stack that differs.
	byBase := map[string]string{}
	for path, sum := range pins.Libraries {
		byBase[filepath.Base(path)] = sum
	}
	var differs []string
	for path, sum := range libs {
		base := filepath.Base(path)
		if !strings.HasPrefix(base, "libllama") && !strings.HasPrefix(base, "libggml") {
			continue // the C and C++ runtimes, not the model's arithmetic
		}
		if want, ok := byBase[base]; !ok || want != sum {
			differs = append(differs, base)
		}
	}
	if len(differs) > 0 {
		// The scorer's own files go into the stack, so the comparison with
		// the record names each library that differs.
		sort.Strings(differs)
		libs2 := map[string]string{}
		for path, sum := range pins.Libraries {
			libs2[path] = sum
		}
		for path, sum := range libs {
			if slices.Contains(differs, filepath.Base(path)) {
				for sp := range libs2 {
					if filepath.Base(sp) == filepath.Base(path) {
						delete(libs2, sp)
					}
				}
				libs2[path] = sum
			}
		}
		pins.Libraries = libs2
	}
	return pins, nil
}

func (p prefillRescorer) Rescore(ctx context.Context, row genrecord.Row) ([]genrecord.Step, error) {
	ids, ok := row.TokenIDs()
	if !ok {
		return nil, fmt.Errorf("row %s: a kept step has no token id, so prefill cannot score it (replay it with --mode exact)", row.RowID)
	}
	return p.scorer.score(row.RowID, row.K, row.PromptTokenIDs, ids)
}

// Fingerprint is the stack a prefill replay ran on, for its result.
func (s *prefillScorer) fingerprint() string {
	return fmt.Sprintf("rig-prefill-score sha256:%s on the pinned llama.cpp libraries (context %d, vocabulary %d, prompt in physical batches of %d, output in calls of %d, weight repacking %s, %d threads; %s)", s.binSHA, s.nctx, s.nvocab, s.promptBatch, s.outputBatch, s.repack, s.threads, s.sysInfo)
}

// modeOf is the mode a request names, exact when it names none.
func modeOf(m string) string {
	if m == "" {
		return ModeExact
	}
	return m
}

// noPrefillWhy says why a runtime replays by its exact path only.
func noPrefillWhy(kind string) string {
	if kind == "ollama" {
		return "Ollama's API cannot score given tokens, and its llama.cpp is linked into the ollama binary, not a library a scorer can load; its rows replay by seeded regeneration (--mode exact)"
	}
	return kind + " has no prefill scorer; replay it with --mode exact"
}

// DefaultPrefillTolerance is the prefill tolerance used when no calibration
// is given: SmolLM2's calibrated tolerance rounded up
// (genrecord/testdata/replay-calibration-prefill-2026-12-02.json: noise at
// most 2.5e-4 nats per token, every control at least 0.32). It is tight on
// purpose: a row it disputes only costs its decode-step replay, which then
// decides, while a loose one could pass an edit a model's noise hides (Gemma
// 3's batched pass drifts up to 1.1 nats, so its rows mostly go the exact
// way without a calibration of their own). A studio's own calibration
// (--calibration) replaces it.
var DefaultPrefillTolerance = genrecord.Tolerance{Token: 0.01, Row: 0.003}

// DefaultPrefillToleranceSource names DefaultPrefillTolerance in results.
const DefaultPrefillToleranceSource = "rig's default prefill tolerance (no --calibration given; rig replay calibrate --mode prefill measures one for this machine)"
