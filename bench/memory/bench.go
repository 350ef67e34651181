package memory

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gp "github.com/gpustack/gguf-parser-go"

	"rig/internal/cgroup"
	"rig/internal/gguf"
	"rig/internal/provision"
	"rig/preflight"
	"rig/runtimes"
)

// Options says what `rig bench preflight` runs.
type Options struct {
	// Installed is what is provisioned: the runtimes' builds, and the
	// models when Models is empty.
	Installed provision.Installed
	Runtimes  []string          // default: each runtime installed
	Models    []provision.Model // default: every provisioned model
	Contexts  []int             // default 2048, 8192, 32768
	KVTypes   []string          // default f16, q8_0
	Limit     preflight.Size    // reservation per run; default 8GiB
	// Calibration is the one the predictions use; nil = the committed table.
	Calibration    *preflight.Calibration
	Fit            bool          // fit new constants from the measurements and print them
	Machine        string        // the machine line for the table
	TablePath      string        // write the measured table here (Markdown) when set
	CalibrationOut string        // write the fitted calibration JSON here when set
	RunTimeout     time.Duration // per run; default 8 minutes
	// Repeats measures each configuration this many times (default 1). The
	// fit then counts the spread between repeats into the trusted error:
	// a peak moves by a few percent from run to run (the runtime's Go
	// garbage collector, allocator timing), which one run per
	// configuration cannot show.
	Repeats int
	// NoSandbox starts the runtimes without their network namespace, as
	// `--no-sandbox` does for a study.
	NoSandbox bool
	Logger    *slog.Logger
}

// Row is one measured run beside the predictions.
type Row struct {
	Model    string         `json:"model"`
	Runtime  string         `json:"runtime"`
	Context  int            `json:"context"`
	KV       string         `json:"kv"`
	Measured preflight.Size `json:"measured_peak"`
	Rig      preflight.Size `json:"rig"`
	Parser   preflight.Size `json:"gguf_parser"`
	// Own is the runtime's own estimate: llama.cpp's fit projection (model +
	// context + compute) for llama-server, the loaded model's size as Ollama's
	// scheduler counts it (/api/ps) for Ollama.
	Own       preflight.Size `json:"own_estimate"`
	Logged    Buffers        `json:"logged"` // the buffers the runtime says it allocated
	RigErr    float64        `json:"rig_error"`
	ParserErr float64        `json:"parser_error"`
	OwnErr    float64        `json:"own_error"`
	// Stack is the runtime's own pins, read by its launcher: byte-identical
	// to what a trial or a replay of the same build records.
	Stack  runtimes.Stack `json:"stack"`
	Note   string         `json:"note,omitempty"`
	Err    string         `json:"error,omitempty"`
	Repeat int            `json:"repeat,omitempty"` // 1-based, when a configuration was measured more than once
	// PromptSentences is the prompt's length in benchPrompt's sentences
	// (about ten tokens each). It is part of a configuration: Ollama's own
	// engine charges its cache and mask as the context fills, so a longer
	// prompt at the same context reads a higher peak.
	PromptSentences int `json:"prompt_sentences,omitempty"`
	vocab           int
	parts           preflight.Size // rig's prediction without the overhead
}

// Buffers are the allocations a runtime reports in its log.
type Buffers struct {
	Model, KV, Compute, Output preflight.Size
}

// benchThreads is the thread count the committed calibration was measured
// at; a thread count changes the compute buffers a little.
const benchThreads = 2

// bench is one measurement session: the builds it starts, and Ollama's
// store with the models imported once.
type bench struct {
	opts   Options
	builds map[string]runtimes.Build
	store  *ollamaStore
}

func (o Options) withDefaults() (Options, error) {
	if o.Repeats < 0 {
		return o, fmt.Errorf("bench: repeats %d: give 1 or more runs per configuration", o.Repeats)
	}
	o.Repeats = max(o.Repeats, 1)
	if len(o.Runtimes) == 0 {
		for _, rt := range []string{preflight.RuntimeLlamaServer, preflight.RuntimeOllama} {
			if _, err := runtimes.BuildOf(o.Installed, rt); err == nil {
				o.Runtimes = append(o.Runtimes, rt)
			}
		}
	}
	o.Models, o.Contexts, o.KVTypes = grid(o.Installed, o.Models, o.Contexts, o.KVTypes)
	if len(o.Runtimes) == 0 || len(o.Models) == 0 {
		return o, fmt.Errorf("bench: %s names no runtime or no model: %w", orFile(o.Installed.File), provision.ErrNotProvisioned)
	}
	if o.Limit == 0 {
		o.Limit = 8 * preflight.GiB
	}
	if o.RunTimeout == 0 {
		// A 1200-token prompt on a shared two-core machine takes minutes.
		o.RunTimeout = 8 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

func orFile(f string) string {
	if f == "" {
		return "installed.env"
	}
	return f
}

// open reads the builds of the runtimes to measure and, for Ollama, imports
// the models into a private store outside any reservation.
func open(ctx context.Context, opts Options) (*bench, error) {
	b := &bench{opts: opts, builds: map[string]runtimes.Build{}}
	for _, rt := range opts.Runtimes {
		if rt != preflight.RuntimeLlamaServer && rt != preflight.RuntimeOllama {
			return nil, fmt.Errorf("bench: runtime %q: unknown (known: %s, %s)", rt, preflight.RuntimeLlamaServer, preflight.RuntimeOllama)
		}
		build, err := runtimes.BuildOf(opts.Installed, rt)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		b.builds[rt] = build
	}
	if _, ok := b.builds[preflight.RuntimeOllama]; ok {
		st, err := b.importOllama(ctx)
		if err != nil {
			return nil, err
		}
		b.store = st
	}
	return b, nil
}

func (b *bench) close() {
	if b.store != nil {
		b.store.close()
	}
}

// Run runs each model at each context and KV type on each runtime inside a
// Reservation, reads the cgroup's peak, and prints rig's prediction,
// gguf-parser-go's and the runtime's own estimate beside the measurement.
func Run(ctx context.Context, w io.Writer, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	cal := opts.Calibration
	if cal == nil {
		if cal, err = preflight.DefaultCalibration(); err != nil {
			return err
		}
	}
	if _, err := cgroup.CleanupStale(ctx); err != nil {
		opts.Logger.Warn("stale reservations remain", "err", err)
	}
	b, err := open(ctx, opts)
	if err != nil {
		return err
	}
	defer b.close()
	var rows []Row
	for _, rt := range opts.Runtimes {
		for _, m := range opts.Models {
			f, err := gguf.Open(m.Path)
			if err != nil {
				return err
			}
			h, err := preflight.ReadHParams(f)
			if err != nil {
				return err
			}
			ref, err := gp.ParseGGUFFile(m.Path)
			if err != nil {
				return fmt.Errorf("bench: gguf-parser-go reads %s: %w", m.Path, err)
			}
			for _, c := range opts.Contexts {
				for _, kv := range opts.KVTypes {
					p := profile(opts, c, kv)
					row := Row{Model: m.Name, Runtime: rt, Context: c, KV: kv, vocab: h.Vocab}
					est, err := preflight.Predict(f, p, rt, cal)
					if err != nil {
						return err
					}
					row.Rig = est.Peak
					row.parts = est.Peak - est.Overhead
					row.Parser = parserEstimate(ref, p)
					for rep := 1; rep <= opts.Repeats; rep++ {
						if err := ctx.Err(); err != nil {
							return err
						}
						r, repeat := row, ""
						if opts.Repeats > 1 {
							r.Repeat, repeat = rep, fmt.Sprintf(" (run %d of %d)", rep, opts.Repeats)
						}
						opts.Logger.Info("bench run", "runtime", rt, "model", m.Name, "ctx", c, "kv", kv, "repeat", rep)
						if err := b.measure(ctx, &r, m, h.ContextLen, p); err != nil {
							r.Err = err.Error()
							opts.Logger.Warn("bench run failed", "runtime", rt, "model", m.Name, "ctx", c, "kv", kv, "err", err)
						}
						rows = append(rows, r)
						fmt.Fprintf(w, "measured %s %s ctx %d kv %s%s: peak %s (rig %s, gguf-parser %s, %s's own %s)\n", rt, m.Name, c, kv, repeat, r.Measured, r.Rig, r.Parser, rt, r.Own)
					}
				}
			}
		}
	}
	return finish(w, opts, cal, rows)
}

// finish fits (with opts.Fit), sets every row's errors and prints and
// writes the table: what Run and Refit share once the peaks are measured.
func finish(w io.Writer, opts Options, cal *preflight.Calibration, rows []Row) error {
	if opts.Fit {
		fitted, err := fitCalibration(cal, rows, opts.Machine)
		if err != nil {
			return err
		}
		for _, rt := range opts.Runtimes {
			rc := fitted.Runtimes[rt]
			fmt.Fprintf(w, "fitted %s: base %s, %.0f bytes per vocabulary entry, relative error %.1f%% over %d runs (repeat spread %.1f%%)\n", rt, preflight.Size(rc.BaseBytes), rc.PerVocabBytes, 100*rc.RelError, rc.Runs, 100*rc.RepeatSpread)
		}
		for i := range rows {
			rc := fitted.Runtimes[rows[i].Runtime]
			rows[i].Rig = rows[i].parts + preflight.Size(rc.BaseBytes+rc.PerVocabBytes*float64(rows[i].vocab))
		}
		cal = fitted
		if opts.CalibrationOut != "" {
			if err := fitted.Save(opts.CalibrationOut); err != nil {
				return err
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		r.RigErr, r.ParserErr, r.OwnErr = relErr(r.Rig, r.Measured), relErr(r.Parser, r.Measured), relErr(r.Own, r.Measured)
	}
	table := benchTable(rows, cal, opts.Machine)
	if _, err := io.WriteString(w, table); err != nil {
		return err
	}
	if opts.TablePath != "" {
		if err := os.WriteFile(opts.TablePath, []byte(table), 0o644); err != nil {
			return fmt.Errorf("bench: write table: %w", err)
		}
	}
	return nil
}

// Measure runs one bench row, model on runtime at contextLen and KV type kv in
// a fresh reservation of opts.Limit, and returns its measurement (peak,
// own estimate, logged buffers and the runtime's Stack; no predictions).
func Measure(ctx context.Context, opts Options, runtime string, m provision.Model, contextLen int, kv string) (Row, error) {
	opts.Runtimes, opts.Models = []string{runtime}, []provision.Model{m}
	opts, err := opts.withDefaults()
	if err != nil {
		return Row{}, err
	}
	f, err := gguf.Open(m.Path)
	if err != nil {
		return Row{}, err
	}
	h, err := preflight.ReadHParams(f)
	if err != nil {
		return Row{}, err
	}
	b, err := open(ctx, opts)
	if err != nil {
		return Row{}, err
	}
	defer b.close()
	r := Row{Model: m.Name, Runtime: runtime, Context: contextLen, KV: kv, vocab: h.Vocab}
	err = b.measure(ctx, &r, m, h.ContextLen, profile(opts, contextLen, kv))
	if err != nil {
		r.Err = err.Error()
	}
	return r, err
}

func profile(opts Options, contextLen int, kv string) preflight.Profile {
	return preflight.Profile{Name: fmt.Sprintf("bench-%d-%s", contextLen, kv), CardMemory: opts.Limit, Context: contextLen, KVType: kv, Parallel: 1, Simulated: true}
}

// measure fills r's measurement: the runtime's start and one completion in a
// fresh reservation.
func (b *bench) measure(ctx context.Context, r *Row, m provision.Model, trained int, p preflight.Profile) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.RunTimeout)
	defer cancel()
	work, err := os.MkdirTemp("", "rig-bench-run-")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(work)
	r.PromptSentences = benchSentences(p.Context)
	cfg := runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: p.Context,
		KVCacheType: strings.ToLower(p.KVType), Threads: benchThreads, WorkDir: work, NoSandbox: b.opts.NoSandbox}
	if r.Runtime == preflight.RuntimeOllama {
		if trained > 0 && cfg.Context > trained {
			// Ollama runs a longer context at the trained length, and
			// the prediction counts it so; the launcher refuses to pin
			// what would not hold, so the row runs what Ollama would.
			cfg.Context = trained
			r.Note = fmt.Sprintf("Ollama runs context %d at the model's trained %d", p.Context, trained)
		}
		return b.measureOllama(ctx, r, cfg)
	}
	r.Own = b.llamaOwnEstimate(ctx, m.Path, p)
	return b.measureLlamaServer(ctx, r, cfg)
}

// reservationPeak is the reservation's peak, 0 when it cannot be read (the
// row then shows no measurement).
func reservationPeak(res *cgroup.Reservation) preflight.Size {
	p, _ := res.Peak()
	return preflight.Size(p)
}

func oomKills(res *cgroup.Reservation) uint64 {
	oom, _ := res.OOM()
	return oom.Kills
}

func relErr(pred, meas preflight.Size) float64 {
	if meas == 0 || pred == 0 {
		return math.NaN()
	}
	return (float64(pred) - float64(meas)) / float64(meas)
}

// parserEstimate is gguf-parser-go's host-memory estimate for a CPU-only
// llama.cpp run without mmap.
func parserEstimate(ref *gp.GGUFFile, p preflight.Profile) preflight.Size {
	kt := gp.GGMLTypeF16
	if p.KVGGMLType() == gguf.TypeQ8_0 {
		kt = gp.GGMLTypeQ8_0
	} else if p.KVGGMLType() == gguf.TypeQ4_0 {
		kt = gp.GGMLTypeQ4_0
	}
	slots := max(p.Parallel, 1)
	e := ref.EstimateLLaMACppRun(
		gp.WithLLaMACppContextSize(int32(p.Context*slots)),
		gp.WithParallelSize(int32(slots)),
		gp.WithLLaMACppCacheKeyType(kt),
		gp.WithLLaMACppCacheValueType(kt),
		gp.WithLLaMACppOffloadLayers(0),
		gp.WithFlashAttention(),
	)
	s := e.Summarize(false, 0, 0)
	if len(s.Items) == 0 {
		return 0
	}
	return preflight.Size(s.Items[0].RAM.NonUMA)
}

// benchPrompt is longer than one physical batch (512 tokens), so it touches
// every page of the compute buffer as a real task's prompt does; a one-line
// prompt would leave it partly untouched and flatter the measurement.
func benchPrompt(context int) string {
	return strings.Repeat(benchSentence, benchSentences(context))
}

const benchSentence = "The quick brown fox jumps over the lazy dog. "

func benchSentences(context int) int { return min(120, context/16) }

// warmFile reads path once from outside the reservation, so its page cache
// is charged there and the measured peak is what the runtime allocates, not
// whether the file happened to be cached.
func warmFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(io.Discard, f); err != nil {
		return fmt.Errorf("bench: read %s: %w", path, err)
	}
	return nil
}

// fitParams is llama-fit-params beside llama-server, when it is built.
func fitParams(server runtimes.Build) string {
	cand := filepath.Join(filepath.Dir(server.Binary), "llama-fit-params")
	if _, err := os.Stat(cand); err == nil {
		return cand
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// grid fills what a measurement left unset: every provisioned model,
// contexts 2048, 8192 and 32768, KV types f16 and q8_0.
func grid(in provision.Installed, models []provision.Model, contexts []int, kvs []string) ([]provision.Model, []int, []string) {
	if len(models) == 0 {
		for _, name := range slices.Sorted(maps.Keys(in.Models)) {
			if m := in.Models[name]; m.Path != "" {
				models = append(models, m)
			}
		}
	}
	if len(contexts) == 0 {
		contexts = []int{2048, 8192, 32768}
	}
	if len(kvs) == 0 {
		kvs = []string{"f16", "q8_0"}
	}
	return models, contexts, kvs
}
