package replaycost

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/provision"
	"rig/replay"
	"rig/runtimes"
)

// ReplayCostGoal is the largest replay cost, as a multiple of the original
// generation's wall time, that each runtime may take.
func ReplayCostGoal(runtime string) float64 {
	if runtime == "ollama" {
		return 1.5 // regeneration in raw mode: no way to force tokens
	}
	return 1.2
}

// ReplayBenchRequest is `rig bench replay`.
type ReplayBenchRequest struct {
	Runtimes  []string
	Model     string
	Lengths   []int // output caps; each row's own token count is what is reported
	Rows      int   // rows per runtime × length
	WorkDir   string
	NoSandbox bool
	// Prefill also replays every llama-server row in prefill mode, side by
	// side with the exact path, at PrefillTolerance (rig's default when
	// zero).
	Prefill          bool
	PrefillTolerance genrecord.Tolerance
}

// PrefillCostGoal is the largest prefill replay cost, as a multiple of the
// original generation, at 256 output tokens and above.
const PrefillCostGoal = 0.2

// ReplayCost is one runtime × output cap of the cost benchmark.
type ReplayCost struct {
	Runtime          string  `json:"runtime"`
	MaxTokens        int     `json:"max_tokens"`
	Rows             int     `json:"rows"`
	Reproduced       int     `json:"reproduced"`
	MeanTokens       float64 `json:"mean_output_tokens"`
	OriginalMS       float64 `json:"original_ms"` // mean wall time of the original call
	ReplayMS         float64 `json:"replay_ms"`   // mean wall time of its replay
	Ratio            float64 `json:"ratio"`       // total replay time / total original time
	ReplayMSPerToken float64 `json:"replay_ms_per_token"`
	Goal             float64 `json:"goal"`
	Pass             bool    `json:"pass"`
	// Threads is what the original and its exact replay ran on (the
	// runtime's threads pin); PrefillThreads the scorer's, which uses every
	// core, since its pass gives the same log-probs at any thread count.
	Threads        int `json:"threads"`
	PrefillThreads int `json:"prefill_threads,omitempty"`
	// The same rows replayed in prefill mode (llama-server, with Prefill).
	PrefillRows       int     `json:"prefill_rows,omitempty"`
	PrefillReproduced int     `json:"prefill_reproduced,omitempty"`
	PrefillMS         float64 `json:"prefill_ms,omitempty"`
	PrefillRatio      float64 `json:"prefill_ratio,omitempty"`
	PrefillMaxDiff    float64 `json:"prefill_max_abs_diff_nats,omitempty"`
	// PrefillFallback counts rows the prefill pass disputed; their exact
	// replay (the fallback) is counted into PrefillMS, as rig replay
	// --mode prefill spends it.
	PrefillFallback int `json:"prefill_fallback_rows,omitempty"`
	// PrefillFloor is what one pass over prompt and output would cost at
	// the runtime's own prompt rate on its pinned threads (its timings of
	// the original calls), against the original: the most a prefill pass
	// on those threads could save on this machine. The scorer, which runs on
	// every core, can go below it only by that.
	PrefillFloor float64 `json:"prefill_floor_ratio,omitempty"`
}

// ReplayFit is a least-squares line of replay wall time on output tokens,
// over every row of one runtime.
type ReplayFit struct {
	Runtime     string  `json:"runtime"`
	MSPerToken  float64 `json:"ms_per_token"`
	InterceptMS float64 `json:"intercept_ms"`
	R2          float64 `json:"r2"`
	Rows        int     `json:"rows"`
}

// ReplaySegment is the marginal cost of output tokens between two caps:
// replay is linear in output length when its extra time per extra token
// stays within the goal of generation's over the same tokens.
type ReplaySegment struct {
	Runtime            string  `json:"runtime"`
	FromTokens         float64 `json:"from_tokens"`
	ToTokens           float64 `json:"to_tokens"`
	OriginalMSPerToken float64 `json:"original_ms_per_token"`
	ReplayMSPerToken   float64 `json:"replay_ms_per_token"`
	Ratio              float64 `json:"ratio"`
	Pass               bool    `json:"pass"`
}

// ReplayBench is the cost benchmark's result.
type ReplayBench struct {
	Model    string          `json:"model"`
	Costs    []ReplayCost    `json:"costs"`
	Segments []ReplaySegment `json:"segments"`
	Fits     []ReplayFit     `json:"fits"`
	Pass     bool            `json:"pass"`
}

// BenchReplay generates rows at each output cap on each runtime, then
// replays them through the same path `rig replay` takes, and compares each
// row's replay wall time with its original generation's, measured in the
// same run on the same stack. All rows are generated before any is
// replayed, so a replay never finds its own prompt in a warm cache.
func BenchReplay(ctx context.Context, req ReplayBenchRequest) (ReplayBench, error) {
	out := ReplayBench{Model: req.Model, Pass: true}
	if req.Rows < 1 || len(req.Lengths) == 0 {
		return out, fmt.Errorf("bench replay: need at least one row and one length (got %d rows, lengths %v)", req.Rows, req.Lengths)
	}
	in, err := provision.Load()
	if err != nil {
		return out, err
	}
	work := req.WorkDir
	if work == "" {
		// A temporary folder, removed after; a given one is kept.
		if work, err = os.MkdirTemp("", "rig-bench-replay-"); err != nil {
			return out, err
		}
		defer os.RemoveAll(work)
	}
	for _, kind := range req.Runtimes {
		costs, fit, err := benchReplayOn(ctx, in, kind, req, filepath.Join(work, kind))
		if err != nil {
			return out, err
		}
		for _, c := range costs {
			out.Pass = out.Pass && c.Pass
		}
		for i := 1; i < len(costs); i++ {
			a, b := costs[i-1], costs[i]
			dt := b.MeanTokens - a.MeanTokens
			if dt <= 0 {
				continue // the longer cap stopped as early: no extra tokens to price
			}
			sg := ReplaySegment{Runtime: kind, FromTokens: a.MeanTokens, ToTokens: b.MeanTokens,
				OriginalMSPerToken: (b.OriginalMS - a.OriginalMS) / dt, ReplayMSPerToken: (b.ReplayMS - a.ReplayMS) / dt}
			if sg.OriginalMSPerToken > 0 {
				sg.Ratio = sg.ReplayMSPerToken / sg.OriginalMSPerToken
			}
			sg.Pass = sg.OriginalMSPerToken > 0 && sg.Ratio <= ReplayCostGoal(kind)
			out.Pass = out.Pass && sg.Pass
			out.Segments = append(out.Segments, sg)
		}
		out.Costs = append(out.Costs, costs...)
		out.Fits = append(out.Fits, fit)
	}
	return out, nil
}

func benchReplayOn(ctx context.Context, in provision.Installed, kind string, req ReplayBenchRequest, work string) ([]ReplayCost, ReplayFit, error) {
	fit := ReplayFit{Runtime: kind}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fit, err
	}
	st, err := replay.StartStack(ctx, in, kind, req.Model, work, req.NoSandbox)
	if err != nil {
		return nil, fit, err
	}
	defer st.Stop()
	prefill := req.Prefill && kind == "llama-server"
	ptol := req.PrefillTolerance
	if ptol == (genrecord.Tolerance{}) {
		ptol = replay.DefaultPrefillTolerance
	}
	if prefill {
		m := in.Models[req.Model]
		if err := st.WithPrefill(ctx, in, m.Path, filepath.Join(work, "prefill"), req.NoSandbox); err != nil {
			return nil, fit, err
		}
	}
	// One call first, so that loading the model is in neither column.
	if _, err := st.Runtime().Generate(ctx, runtimes.Request{CallID: "warm-up", Messages: []runtimes.Message{{Role: "user", Content: "Hello."}}, MaxTokens: 4, TopK: genrecord.DefaultK}); err != nil {
		return nil, fit, fmt.Errorf("%s warm-up: %w", kind, err)
	}
	path := filepath.Join(work, "bench.jsonl")
	w, err := genrecord.OpenWriter(path, st.Pins())
	if err != nil {
		return nil, fit, err
	}
	defer w.Close()
	run := &replayRun{kind: kind, st: st, path: path, prefill: prefill, ptol: ptol,
		capOf: map[string]int{}, tokens: map[string]int{}, floorMS: map[string]float64{}, prefills: map[string]genrecord.RowResult{}}
	if err := run.generateAndReplay(ctx, req, w); err != nil {
		return nil, fit, err
	}
	slog.InfoContext(ctx, "bench replay: done", "runtime", kind, "rows", len(run.results))
	costs, xs, ys := run.costs()
	fit.MSPerToken, fit.InterceptMS, fit.R2 = lineFit(xs, ys)
	fit.Rows = len(xs)
	return costs, fit, nil
}

// replayRun is one runtime's replay bench under way: the record it writes
// and what each of its rows measured, by row id.
type replayRun struct {
	kind    string
	st      *replay.Stack
	path    string // the generation record
	prefill bool   // also replay each row by prefill, within ptol
	ptol    genrecord.Tolerance

	capOf, tokens map[string]int
	floorMS       map[string]float64 // the prompt-speed floor of a prefill replay
	results       []genrecord.RowResult
	prefills      map[string]genrecord.RowResult
}

// generateAndReplay generates the bench's rows into w, replaying each one
// after the next is generated.
func (run *replayRun) generateAndReplay(ctx context.Context, req ReplayBenchRequest, w *genrecord.Writer) error {
	kind, st := run.kind, run.st
	prev := ""
	// Interleave the caps so that a drift in machine load falls on all of them.
	for i := range req.Rows {
		for _, n := range req.Lengths {
			msgs, samp := replay.RowPlan(2*i+1, "Write a long story about %s.")
			samp.Seed = 5000 + i*len(req.Lengths) + n
			id := fmt.Sprintf("len%d-%03d", n, i)
			res, err := st.Runtime().Generate(ctx, runtimes.Request{CallID: id, Messages: msgs, Sampling: samp, MaxTokens: n, TopK: genrecord.DefaultK})
			if err != nil {
				return fmt.Errorf("%s, row %s: %w", kind, id, err)
			}
			row := callrow.Row(id, req.Model, genrecord.RoleCandidate, callrow.Sampling(samp, n), genrecord.DefaultK, res)
			if err := w.Append(row); err != nil {
				return err
			}
			run.capOf[id], run.tokens[id] = n, len(row.Output)
			if t := res.Timings; t.PromptTokens > 0 && t.PromptDuration > 0 {
				perToken := float64(t.PromptDuration) / float64(time.Millisecond) / float64(t.PromptTokens)
				run.floorMS[id] = perToken * float64(res.PromptTokens+len(row.Output))
			}
			if prev != "" {
				if err := run.replayRow(ctx, prev); err != nil {
					return err
				}
			}
			prev = id
		}
	}
	return run.replayRow(ctx, prev)
}

// replayRow replays one row of the record exactly, and by prefill where the
// bench measures it.
//
// Each row is replayed right after the next one is generated: the two
// columns see the same machine load, and the replay never finds its own
// prompt in the runtime's cache (Ollama keeps the last prompt's).
func (run *replayRun) replayRow(ctx context.Context, id string) error {
	kind, st := run.kind, run.st
	sum, err := genrecord.Replay(ctx, run.path, st.Exact(), genrecord.ReplayOptions{Rows: []string{id}})
	if err != nil {
		return err
	}
	if sum.Status == genrecord.StatusStackDiffers || len(sum.Results) != 1 {
		return fmt.Errorf("%s, row %s: replay gave %s with %d results", kind, id, sum.Status, len(sum.Results))
	}
	run.results = append(run.results, sum.Results[0])
	if run.prefill {
		ps, err := genrecord.Replay(ctx, run.path, st.Rescorer(), genrecord.ReplayOptions{Rows: []string{id}, Tolerance: run.ptol})
		if err != nil {
			return err
		}
		if len(ps.Results) != 1 {
			return fmt.Errorf("%s, row %s: prefill replay gave %s with %d results", kind, id, ps.Status, len(ps.Results))
		}
		run.prefills[id] = ps.Results[0]
	}
	return nil
}

// costs sums the replayed rows into one cost per output cap, sorted by
// cap, and returns each row's tokens and replay time for the line fit.
func (run *replayRun) costs() (costs []ReplayCost, xs, ys []float64) {
	kind, st := run.kind, run.st
	by := map[int]*ReplayCost{}
	for _, r := range run.results {
		n := run.capOf[r.RowID]
		c := by[n]
		if c == nil {
			c = &ReplayCost{Runtime: kind, MaxTokens: n, Goal: ReplayCostGoal(kind), Threads: st.Runtime().Pins().Threads, PrefillThreads: st.PrefillThreads()}
			by[n] = c
		}
		c.Rows++
		if r.Status == genrecord.StatusReproduced {
			c.Reproduced++
		}
		c.MeanTokens += float64(run.tokens[r.RowID])
		c.OriginalMS += r.WallMS
		c.ReplayMS += r.ReplayMS
		if p, ok := run.prefills[r.RowID]; ok {
			c.PrefillRows++
			c.PrefillFloor += run.floorMS[r.RowID]
			c.PrefillMS += p.ReplayMS
			c.PrefillMaxDiff = max(c.PrefillMaxDiff, p.Comparison.MaxAbsDiff)
			if p.Status == genrecord.StatusReproduced {
				c.PrefillReproduced++
			} else {
				c.PrefillFallback++
				c.PrefillMS += r.ReplayMS
			}
		}
		xs, ys = append(xs, float64(run.tokens[r.RowID])), append(ys, r.ReplayMS)
	}
	for _, c := range by {
		averageReplayCost(c)
		costs = append(costs, *c)
	}
	sort.Slice(costs, func(i, j int) bool { return costs[i].MaxTokens < costs[j].MaxTokens })
	return costs, xs, ys
}

// averageReplayCost turns c's sums over its rows into ratios and means, and
// judges it against its goal.
func averageReplayCost(c *ReplayCost) {
	var toks = c.MeanTokens
	if c.OriginalMS > 0 {
		c.Ratio = c.ReplayMS / c.OriginalMS
		c.PrefillRatio = c.PrefillMS / c.OriginalMS
		c.PrefillFloor /= c.OriginalMS
	}
	if c.PrefillRows > 0 {
		c.PrefillMS /= float64(c.PrefillRows)
	}
	if toks > 0 {
		c.ReplayMSPerToken = c.ReplayMS / toks
	}
	c.MeanTokens /= float64(c.Rows)
	c.OriginalMS /= float64(c.Rows)
	c.ReplayMS /= float64(c.Rows)
	c.Pass = c.Ratio > 0 && c.Ratio <= c.Goal && c.Reproduced == c.Rows
}

// lineFit is ordinary least squares of y on x, with R².
func lineFit(xs, ys []float64) (slope, intercept, r2 float64) {
	n := float64(len(xs))
	if n < 2 {
		return 0, 0, 0
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return 0, my, 0
	}
	slope = sxy / sxx
	intercept = my - slope*mx
	if syy > 0 {
		r2 = sxy * sxy / (sxx * syy)
	}
	return slope, intercept, r2
}

// threadsWord says a thread count: "1 thread", "2 threads", or "its
// default threads" where the runtime's pins gave none.
func threadsWord(n int) string {
	switch n {
	case 0:
		return "its default threads"
	case 1:
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}

// WriteText prints the side-by-side table and the goal lines.
func (b ReplayBench) WriteText(w io.Writer) error {
	var s strings.Builder
	fmt.Fprintf(&s, "replay cost of %s: each row generated, then replayed the way `rig replay` does it, on the same stack in the same run\n", b.Model)
	tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "runtime\tthreads\tcap\trows\treproduced\tmean tokens\toriginal ms\treplay ms\treplay ms/token\tratio\tgoal\t\t")
	for _, c := range b.Costs {
		verdict := "met"
		switch {
		case c.Reproduced != c.Rows:
			verdict = "NOT MET (rows not reproduced)"
		case !c.Pass:
			verdict = "NOT MET"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t%.3f\t≤ %.1f\t%s\t\n", c.Runtime, c.Threads, c.MaxTokens, c.Rows, c.Reproduced, c.MeanTokens, c.OriginalMS, c.ReplayMS, c.ReplayMSPerToken, c.Ratio, c.Goal, verdict)
	}
	tw.Flush()
	for _, sg := range b.Segments {
		verdict := "linear"
		if !sg.Pass {
			verdict = "NOT MET"
		}
		fmt.Fprintf(&s, "%s, extra tokens %.0f→%.0f: original %.2f ms/token, replay %.2f ms/token, ratio %.3f (goal ≤ %.1f): %s\n",
			sg.Runtime, sg.FromTokens, sg.ToTokens, sg.OriginalMSPerToken, sg.ReplayMSPerToken, sg.Ratio, ReplayCostGoal(sg.Runtime), verdict)
	}
	for _, f := range b.Fits {
		fmt.Fprintf(&s, "%s: replay ms = %.2f + %.2f × output tokens (R² %.3f over %d rows)\n", f.Runtime, f.InterceptMS, f.MSPerToken, f.R2, f.Rows)
	}
	for _, c := range b.Costs {
		if c.PrefillRows == 0 {
			continue
		}
		verdict := ""
		if float64(c.MaxTokens) >= 256 {
			verdict = fmt.Sprintf(" (goal ≤ %.1f× at 256 tokens and above: %s)", PrefillCostGoal, map[bool]string{true: "met", false: "NOT MET"}[c.PrefillRatio <= PrefillCostGoal])
		}
		fmt.Fprintf(&s, "%s prefill, cap %d: %d/%d rows within the tolerance in one pass (max |Δ| %.3g nats), %d checked again by decode steps; %.1f ms a row with the fallback (scorer on %s), against %.1f ms generated (on %s): %.3f×%s; at the runtime's own prompt rate on its pinned threads a pass would cost %.3f×\n",
			c.Runtime, c.MaxTokens, c.PrefillReproduced, c.PrefillRows, c.PrefillMaxDiff, c.PrefillFallback, c.PrefillMS, threadsWord(c.PrefillThreads), c.OriginalMS, threadsWord(c.Threads), c.PrefillRatio, verdict, c.PrefillFloor)
	}
	if b.Pass {
		s.WriteString("goal: replay at most 1.2× the original on llama-server and 1.5× on Ollama, at every length and per extra token (linear): met\n")
	} else {
		s.WriteString("goal: replay at most 1.2× the original on llama-server and 1.5× on Ollama, at every length and per extra token (linear): NOT MET\n")
	}
	_, err := io.WriteString(w, s.String())
	return err
}
