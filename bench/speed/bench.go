package speed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"rig/internal/provision"
	"rig/runtimes"
)

// The goals of the bench, as Ollama's figure over llama-server's on the
// same file: a release-style Ollama build computes with the same ggml
// kernels, so it should keep most of llama-server's speed.
const (
	GenerationGoal = 0.75
	PromptGoal     = 0.6
)

// Request is one `rig bench runtimes`.
type Request struct {
	Installed provision.Installed
	// Runtimes to compare (default: every provisioned server runtime);
	// llama-server is the reference and must be among them.
	Runtimes []string
	// Models are registry names (default: both bundled models).
	Models []string
	// Threads are the thread counts to measure at (default 1 and 2).
	Threads []int
	// Reps is how many times each call is repeated (default 3).
	Reps int
	// PromptTokens and GenTokens are llama-bench's pp and tg sizes
	// (default 512 and 128); Context holds both (default 2048).
	PromptTokens, GenTokens, Context int
	WorkDir                          string
	NoSandbox                        bool
	// Probe runs the spare-core probe (cause.go) for every runtime at a
	// thread count that takes every core, not only where a goal is missed.
	Probe bool
}

// Call is one measured call, as the runtime timed it and as rig did.
type Call struct {
	Rep          int           `json:"rep"`
	Kind         string        `json:"kind"` // "pp" or "tg"
	PromptTokens int           `json:"prompt_tokens"`
	OutputTokens int           `json:"output_tokens"`
	PromptTime   time.Duration `json:"prompt_ns"`
	OutputTime   time.Duration `json:"output_ns"`
	Wall         time.Duration `json:"wall_ns"`
	PeakMemory   int64         `json:"peak_memory_bytes"`
}

// Row is one runtime at one model and thread count.
type Row struct {
	Runtime string `json:"runtime"`
	// PP and TG are tokens/s over the repetitions (pp: prompt of
	// PromptTokens; tg: GenTokens generated).
	PP Stat `json:"pp_tok_s"`
	TG Stat `json:"tg_tok_s"`
	// TTFT is the wall time of the pp call (the prompt read, one token
	// out); TPOT the runtime's generation time per token of the tg call.
	// Percentiles are over the calls (with 3 repetitions, p99 is the
	// slowest).
	TTFT Percentiles `json:"ttft_ms"`
	TPOT Percentiles `json:"tpot_ms"`
	// TPOTBusy is the spare-core probe's: the same tg call made right after
	// each measured one, with the cores the runtime does not compute on
	// kept busy (cause.go). Nil outside the probe.
	TPOTBusy   *Percentiles `json:"tpot_busy_ms,omitempty"`
	PeakMemory int64        `json:"peak_memory_bytes"`
	// Coverage is the share of each call's wall time that the runtime's
	// own prompt and generation times account for (min and max): below 1
	// by the HTTP and tokenizer overhead, never above.
	Coverage [2]float64 `json:"timing_coverage"`
	Calls    []Call     `json:"calls"`
}

// Cell is one model at one thread count: every runtime, and each one's
// ratio to llama-server.
type Cell struct {
	Model   string `json:"model"`
	Quant   string `json:"quant"`
	Threads int    `json:"threads"`
	Rows    []Row  `json:"rows"`
	// Ratios are, per runtime other than llama-server, its mean pp and tg
	// tokens/s over llama-server's.
	Ratios []Ratio `json:"ratios"`
}

// Ratio is one runtime's speed over llama-server's in one cell.
type Ratio struct {
	Runtime string  `json:"runtime"`
	PP      float64 `json:"pp"`
	TG      float64 `json:"tg"`
	Pass    bool    `json:"pass"`
}

// Build is one runtime build as it ran: its pins and the CPU backend it
// loaded.
type Build struct {
	Runtime      string               `json:"runtime"`
	Version      string               `json:"version"`
	BinarySHA256 string               `json:"binary_sha256"`
	BuildFlags   string               `json:"build_flags"`
	WeightRepack string               `json:"weight_repack,omitempty"`
	CPU          *runtimes.CPUBackend `json:"cpu_backend,omitempty"`
}

// Result is the whole bench.
type Result struct {
	Date         string  `json:"date"`
	Machine      string  `json:"machine"`
	Builds       []Build `json:"builds"`
	PromptTokens int     `json:"prompt_tokens"`
	GenTokens    int     `json:"gen_tokens"`
	Context      int     `json:"context"`
	Reps         int     `json:"reps"`
	Cells        []Cell  `json:"cells"`
	// Causes probe each missed generation goal at a thread count that
	// takes every core (cause.go).
	Causes []Cause `json:"causes,omitempty"`
	Pass   bool    `json:"pass"`
}

// Run measures every model × thread count: each runtime started on the
// same file with the same threads and context through its provisioned
// build, one warm-up call each, then the repetitions, interleaved (each
// repetition's pp and tg calls go to every runtime in turn, the first
// runtime rotating), so that a machine whose load drifts slows every
// runtime alike.
func Run(ctx context.Context, req Request) (Result, error) {
	req = withDefaults(req)
	if !slices.Contains(req.Runtimes, "llama-server") {
		return Result{}, fmt.Errorf("bench runtimes: --runtime %s: llama-server must be among them (it is the reference, and its tokenizer sizes the prompts)", strings.Join(req.Runtimes, ","))
	}
	res := Result{Date: time.Now().UTC().Format("2006-01-02"), Machine: runtimes.ReadMachine().String(),
		PromptTokens: req.PromptTokens, GenTokens: req.GenTokens, Context: req.Context, Reps: req.Reps, Pass: true}
	work := req.WorkDir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "rig-bench-runtimes-"); err != nil {
			return res, err
		}
		defer os.RemoveAll(work)
	}
	builds := map[string]runtimes.Build{}
	for _, kind := range req.Runtimes {
		b, err := runtimes.BuildOf(req.Installed, kind)
		if err != nil {
			return res, err
		}
		builds[kind] = b
	}
	// llama-server logs its CPU features only at its debug verbosity, which
	// also logs every decoding step; so one start at that verbosity, before
	// and apart from the measured ones, reads them.
	lsCPU, err := probeCPU(ctx, req, builds["llama-server"], filepath.Join(work, "probe"))
	if err != nil {
		return res, err
	}
	seen := map[string]bool{}
	for _, name := range req.Models {
		m, err := req.Installed.Model(name)
		if err != nil {
			return res, err
		}
		for _, threads := range req.Threads {
			cell, pins, err := runCell(ctx, req, builds, m, threads, 0, filepath.Join(work, fmt.Sprintf("%s-t%d", name, threads)))
			if err != nil {
				return res, fmt.Errorf("bench runtimes: %s at %d threads: %w", name, threads, err)
			}
			res.Cells = append(res.Cells, cell)
			for _, r := range cell.Ratios {
				res.Pass = res.Pass && r.Pass
				if (r.TG >= GenerationGoal && !req.Probe) || threads < 2 || threads < runtime.NumCPU() {
					continue
				}
				// Every core computes: probe whether the gap is work
				// that wants a spare core.
				cs, err := probeCause(cell, r.Runtime, func(t, spare int) (Cell, error) {
					c, _, err := runCell(ctx, req, builds, m, t, spare, filepath.Join(work, fmt.Sprintf("%s-t%d-probe", name, t)))
					return c, err
				})
				if err != nil {
					return res, fmt.Errorf("bench runtimes: probing %s's gap on %s at %d threads: %w", r.Runtime, name, threads, err)
				}
				cs.OpenMP, cs.RefOpenMP = openMP(pins[r.Runtime].CPU), openMP(lsCPU)
				cs.Reading = cs.read()
				res.Causes = append(res.Causes, cs)
			}
			for _, kind := range req.Runtimes {
				if p := pins[kind]; !seen[kind] {
					seen[kind] = true
					if p.CPU == nil && kind == "llama-server" {
						p.CPU = lsCPU
					}
					res.Builds = append(res.Builds, Build{Runtime: kind, Version: p.RuntimeVersion, BinarySHA256: p.BinarySHA256,
						BuildFlags: p.BuildFlags, WeightRepack: p.WeightRepack, CPU: p.CPU})
				}
			}
		}
	}
	return res, nil
}

// probeCPU starts llama-server at its debug verbosity on the first model
// and reads the CPU backend it reports.
func probeCPU(ctx context.Context, req Request, b runtimes.Build, work string) (*runtimes.CPUBackend, error) {
	m, err := req.Installed.Model(req.Models[0])
	if err != nil {
		return nil, err
	}
	rt, err := b.Start(ctx, runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: req.Context, Threads: 1,
		WorkDir: work, NoSandbox: req.NoSandbox, VerboseLog: true})
	if err != nil {
		return nil, fmt.Errorf("bench runtimes: reading llama-server's CPU backend: %w", err)
	}
	defer rt.Stop(context.Background())
	return rt.Pins().CPU, nil
}

func withDefaults(req Request) Request {
	if len(req.Runtimes) == 0 {
		req.Runtimes = []string{"llama-server"}
		if req.Installed.Ollama != "" {
			req.Runtimes = append(req.Runtimes, "ollama")
		}
	}
	if len(req.Models) == 0 {
		req.Models = []string{"smollm2-135m-instruct", "gemma-3-270m"}
	}
	if len(req.Threads) == 0 {
		req.Threads = []int{1, 2}
	}
	if req.Reps <= 0 {
		req.Reps = 3
	}
	if req.PromptTokens <= 0 {
		req.PromptTokens = 512
	}
	if req.GenTokens <= 0 {
		req.GenTokens = 128
	}
	if req.Context <= 0 {
		req.Context = 2048
	}
	return req
}

// speeder is a runtime that can take the bench's call (LlamaServer.Speed,
// Ollama.Speed).
type speeder interface {
	runtimes.Runtime
	Speed(ctx context.Context, prompt string, maxTokens int) (runtimes.Result, error)
}

// runCell measures one model at one thread count on every runtime. With
// spare > 0 each tg call is made twice in a row, the second time with spare
// cores kept busy ("tg-busy": the spare-core probe, cause.go).
func runCell(ctx context.Context, req Request, builds map[string]runtimes.Build, m provision.Model, threads, spare int, work string) (Cell, map[string]runtimes.Pins, error) {
	cell := Cell{Model: m.Name, Quant: m.Quant, Threads: threads}
	started := map[string]speeder{}
	defer func() {
		for _, rt := range started {
			_ = rt.Stop(context.Background())
		}
	}()
	pins, err := startCellRuntimes(ctx, req, builds, m, threads, work, started)
	if err != nil {
		return cell, nil, err
	}
	ls := started["llama-server"].(*runtimes.LlamaServer)
	pp := make([]string, req.Reps)
	for i := range pp {
		var err error
		if pp[i], err = promptOf(ctx, ls, req.PromptTokens, uint64(i)); err != nil {
			return cell, nil, err
		}
	}
	// Warm-up: the first call after a load pays for page faults and thread
	// start-up, which no repetition should.
	for _, kind := range req.Runtimes {
		if _, err := started[kind].Speed(ctx, countingPrompt(1000), 8); err != nil {
			return cell, nil, fmt.Errorf("%s warm-up: %w", kind, err)
		}
	}
	rows := map[string]*Row{}
	for _, kind := range req.Runtimes {
		rows[kind] = &Row{Runtime: kind}
	}
	n := len(req.Runtimes)
	for rep := 0; rep < req.Reps; rep++ {
		for i := 0; i < n; i++ {
			kind := req.Runtimes[(i+rep)%n]
			for _, c := range repCalls(req, pp[rep], rep, spare) {
				call, err := timeCall(ctx, started[kind], kind, c, rep, spare)
				if err != nil {
					return cell, nil, err
				}
				rows[kind].Calls = append(rows[kind].Calls, call)
			}
		}
	}
	for _, kind := range req.Runtimes {
		row := rows[kind]
		row.summarize()
		cell.Rows = append(cell.Rows, *row)
	}
	ref := rows["llama-server"]
	for _, kind := range req.Runtimes {
		if kind == "llama-server" {
			continue
		}
		r := Ratio{Runtime: kind, PP: rows[kind].PP.Mean / ref.PP.Mean, TG: rows[kind].TG.Mean / ref.TG.Mean}
		r.Pass = r.PP >= PromptGoal && r.TG >= GenerationGoal
		cell.Ratios = append(cell.Ratios, r)
	}
	return cell, pins, nil
}

// startCellRuntimes starts each runtime of the bench on model m with the
// cell's threads, into started (which the caller stops), and returns
// their pins.
func startCellRuntimes(ctx context.Context, req Request, builds map[string]runtimes.Build, m provision.Model, threads int, work string, started map[string]speeder) (map[string]runtimes.Pins, error) {
	pins := map[string]runtimes.Pins{}
	for _, kind := range req.Runtimes {
		cfg := runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: req.Context, Threads: threads,
			WorkDir: filepath.Join(work, kind), NoSandbox: req.NoSandbox}
		rt, err := builds[kind].Start(ctx, cfg)
		if err != nil {
			return nil, err
		}
		sp, ok := rt.(speeder)
		if !ok {
			_ = rt.Stop(ctx)
			return nil, fmt.Errorf("%s cannot take the bench's raw call", kind)
		}
		started[kind] = sp
		pins[kind] = rt.Pins()
	}
	return pins, nil
}

// plannedCall is one timed call of a repetition: its kind (pp, tg or
// tg-busy), its prompt and its output cap.
type plannedCall struct {
	kind, prompt string
	max          int
}

// repCalls are the calls of repetition rep on one runtime: prompt
// processing on prompt, generation, and generation beside spare busy
// threads where the machine has spare cores.
func repCalls(req Request, prompt string, rep, spare int) []plannedCall {
	calls := []plannedCall{{"pp", prompt, 1}, {"tg", countingPrompt(1 + 100*rep), req.GenTokens}}
	if spare > 0 {
		calls = append(calls, plannedCall{"tg-busy", countingPrompt(1 + 100*rep), req.GenTokens})
	}
	return calls
}

// timeCall makes call c on runtime kind, spinning spare threads through a
// tg-busy call, and checks what it measured.
func timeCall(ctx context.Context, sp speeder, kind string, c plannedCall, rep, spare int) (Call, error) {
	var stop func()
	if c.kind == "tg-busy" {
		stop = spin(spare)
	}
	r, err := sp.Speed(ctx, c.prompt, c.max)
	if stop != nil {
		stop()
	}
	if err != nil {
		return Call{}, fmt.Errorf("%s %s rep %d: %w", kind, c.kind, rep+1, err)
	}
	call := Call{Rep: rep + 1, Kind: c.kind, PromptTokens: r.Timings.PromptTokens, OutputTokens: r.Timings.OutputTokens,
		PromptTime: r.Timings.PromptDuration, OutputTime: r.Timings.OutputDuration, Wall: r.Wall, PeakMemory: r.PeakMemory}
	if err := call.check(); err != nil {
		return Call{}, fmt.Errorf("%s %s rep %d: %w", kind, c.kind, rep+1, err)
	}
	return call, nil
}

// errTiming is a call whose runtime-reported times do not fit its wall time.
var errTiming = errors.New("the runtime's own times do not fit the call's wall time")

// check holds a call's runtime timings to its wall time: the runtime's
// prompt and generation times are inside the call, so together they
// cannot exceed the wall (beyond clock granularity), and a call that
// reports no time or no token cannot give a rate.
func (c Call) check() error {
	timed := c.PromptTime
	if c.Kind != "pp" {
		timed += c.OutputTime
		if c.OutputTokens == 0 || c.OutputTime <= 0 {
			return fmt.Errorf("%w: %d output tokens in %s", errTiming, c.OutputTokens, c.OutputTime)
		}
	}
	if c.PromptTokens == 0 || c.PromptTime <= 0 {
		return fmt.Errorf("%w: %d prompt tokens in %s", errTiming, c.PromptTokens, c.PromptTime)
	}
	if timed > c.Wall+2*time.Millisecond {
		return fmt.Errorf("%w: %s of prompt and generation in a call of %s", errTiming, timed, c.Wall)
	}
	return nil
}

func (r *Row) summarize() {
	var pp, tg, ttft, tpot, busy []float64
	r.Coverage = [2]float64{1, 0}
	for _, c := range r.Calls {
		r.PeakMemory = max(r.PeakMemory, c.PeakMemory)
		timed := c.PromptTime
		switch c.Kind {
		case "pp":
			pp = append(pp, float64(c.PromptTokens)/c.PromptTime.Seconds())
			ttft = append(ttft, ms(c.Wall))
		case "tg":
			timed += c.OutputTime
			tg = append(tg, float64(c.OutputTokens)/c.OutputTime.Seconds())
			tpot = append(tpot, ms(c.OutputTime)/float64(c.OutputTokens))
		case "tg-busy":
			timed += c.OutputTime
			busy = append(busy, ms(c.OutputTime)/float64(c.OutputTokens))
		}
		cov := timed.Seconds() / c.Wall.Seconds()
		r.Coverage = [2]float64{min(r.Coverage[0], cov), max(r.Coverage[1], cov)}
	}
	r.PP, r.TG = statOf(pp), statOf(tg)
	r.TTFT, r.TPOT = percentilesOf(ttft), percentilesOf(tpot)
	if len(busy) > 0 {
		p := percentilesOf(busy)
		r.TPOTBusy = &p
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// words make the prompts: common English words, each one token (with its
// leading space) in both bundled models' vocabularies, so a prompt can be
// sized to the token.
var words = strings.Fields(`the river house water light stone green small old road field tree morning
	window table garden letter story music paper winter summer city village friend mother father
	door market bridge mountain forest school teacher animal evening season country island valley
	cloud rain wind fire kitchen bread cheese apple orange yellow black white people number little`)

// promptOf is a prompt of exactly tokens tokens by llama-server's tokenizer
// (the model's own, BOS included), words drawn by seed, so each repetition
// reads a prompt no runtime has cached.
func promptOf(ctx context.Context, ls *runtimes.LlamaServer, tokens int, seed uint64) (string, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	all := make([]string, 2*tokens)
	for i := range all {
		all[i] = words[rng.IntN(len(words))]
	}
	// No fixed opening: Ollama reuses a cached prompt's common prefix, and
	// would then read fewer tokens than llama-server.
	text := func(n int) string { return strings.Join(all[:n], " ") + "." }
	count := func(n int) (int, error) {
		ids, err := ls.Tokenize(ctx, text(n))
		return len(ids), err
	}
	// The largest word count whose prompt fits, by bisection.
	lo, hi := 1, len(all)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		c, err := count(mid)
		if err != nil {
			return "", err
		}
		if c <= tokens {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if c, err := count(lo); err != nil || c != tokens {
		return "", fmt.Errorf("sizing a prompt of %d tokens: the nearest is %d (%v)", tokens, c, err)
	}
	return text(lo), nil
}

// countingPrompt asks the model to go on counting from n: every model
// continues it for as long as it is let, so a tg call generates all its
// tokens, and each repetition starts from another number.
func countingPrompt(n int) string {
	var b strings.Builder
	b.WriteString("Counting:")
	for i := n; i < n+8; i++ {
		fmt.Fprintf(&b, " %d,", i)
	}
	return b.String()
}
