package preflight

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gp "github.com/gpustack/gguf-parser-go"
)

// BenchOptions says what `rig bench preflight` runs.
type BenchOptions struct {
	LlamaServerBin string            // LLAMA_SERVER_BIN
	OllamaBin      string            // OLLAMA_BIN
	Runtimes       []string          // default: each runtime whose binary is set
	FitParamsBin   string            // llama-fit-params beside it; empty = look there
	Models         map[string]string // name → GGUF path (SMOLLM2_GGUF, GEMMA3_GGUF)
	Contexts       []int             // default 2048, 8192, 32768
	KVTypes        []string          // default f16, q8_0
	Limit          Size              // reservation per run; default 8GiB
	Calibration    *Calibration      // nil = committed table
	Fit            bool              // fit new constants from the measurements and print them
	Machine        string            // the machine line for the table
	TablePath      string            // write the measured table here (Markdown) when set
	CalibrationOut string            // write the fitted calibration JSON here when set
	RunTimeout     time.Duration     // per run; default 8 minutes
	// Repeats measures each configuration this many times (default 1). The
	// fit then counts the spread between repeats into the trusted error:
	// a peak moves by a few percent from run to run (the runtime's Go
	// garbage collector, allocator timing), which one run per
	// configuration cannot show.
	Repeats int
	Logger  *slog.Logger
}

// BenchRow is one measured run beside the predictions.
type BenchRow struct {
	Model    string `json:"model"`
	Runtime  string `json:"runtime"`
	Context  int    `json:"context"`
	KV       string `json:"kv"`
	Measured Size   `json:"measured_peak"`
	Rig      Size   `json:"rig"`
	Parser   Size   `json:"gguf_parser"`
	// Own is the runtime's own estimate: llama.cpp's fit projection (model +
	// context + compute) for llama-server, the loaded model's size as Ollama's
	// scheduler counts it (/api/ps) for Ollama.
	Own       Size    `json:"own_estimate"`
	Logged    Buffers `json:"logged"` // the buffers the runtime says it allocated
	RigErr    float64 `json:"rig_error"`
	ParserErr float64 `json:"parser_error"`
	OwnErr    float64 `json:"own_error"`
	vocab     int
	parts     Size   // rig's prediction without the overhead
	Err       string `json:"error,omitempty"`
	Repeat    int    `json:"repeat,omitempty"` // 1-based, when a configuration was measured more than once
}

// Buffers are the allocations llama.cpp reports in its log.
type Buffers struct {
	Model, KV, Compute, Output Size
}

// LoadInstalled reads ~/.cache/rig/installed.env (KEY=VALUE lines).
func LoadInstalled(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("preflight: installed runtimes: %w", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "export "))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return out, nil
}

// DefaultInstalledPath is where the provisioning step lists the real runtimes.
func DefaultInstalledPath() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "rig", "installed.env")
}

// BenchPreflight runs each model at each context and KV type on each runtime
// inside a Reservation, reads the cgroup's peak, and prints rig's
// prediction, gguf-parser-go's and the runtime's own estimate beside the
// measurement.
func BenchPreflight(ctx context.Context, w io.Writer, opts BenchOptions) error {
	if len(opts.Runtimes) == 0 {
		if opts.LlamaServerBin != "" {
			opts.Runtimes = append(opts.Runtimes, RuntimeLlamaServer)
		}
		if opts.OllamaBin != "" {
			opts.Runtimes = append(opts.Runtimes, RuntimeOllama)
		}
	}
	for _, rt := range opts.Runtimes {
		switch {
		case rt == RuntimeLlamaServer && opts.LlamaServerBin == "", rt == RuntimeOllama && opts.OllamaBin == "":
			return fmt.Errorf("preflight: bench: runtime %s: its binary is not set (LLAMA_SERVER_BIN / OLLAMA_BIN in ~/.cache/rig/installed.env)", rt)
		case rt != RuntimeLlamaServer && rt != RuntimeOllama:
			return fmt.Errorf("preflight: bench: runtime %q: unknown (known: %s, %s)", rt, RuntimeLlamaServer, RuntimeOllama)
		}
	}
	if len(opts.Runtimes) == 0 || len(opts.Models) == 0 {
		return errors.New("preflight: bench: a runtime binary (LlamaServerBin or OllamaBin) and Models are required (see ~/.cache/rig/installed.env)")
	}
	if len(opts.Contexts) == 0 {
		opts.Contexts = []int{2048, 8192, 32768}
	}
	if len(opts.KVTypes) == 0 {
		opts.KVTypes = []string{"f16", "q8_0"}
	}
	if opts.Limit == 0 {
		opts.Limit = 8 * GiB
	}
	if opts.RunTimeout == 0 {
		// A 1200-token prompt on a shared two-core machine takes minutes.
		opts.RunTimeout = 8 * time.Minute
	}
	if opts.Repeats < 0 {
		return fmt.Errorf("preflight: bench: repeats %d: give 1 or more runs per configuration", opts.Repeats)
	}
	opts.Repeats = max(opts.Repeats, 1)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.FitParamsBin == "" && opts.LlamaServerBin != "" {
		cand := filepath.Join(filepath.Dir(opts.LlamaServerBin), "llama-fit-params")
		if _, err := os.Stat(cand); err == nil {
			opts.FitParamsBin = cand
		}
	}
	cal := opts.Calibration
	if cal == nil {
		var err error
		if cal, err = DefaultCalibration(); err != nil {
			return err
		}
	}
	if _, err := CleanupStale(ctx); err != nil {
		opts.Logger.Warn("stale reservations remain", "err", err)
	}
	var store *ollamaStore
	if slices.Contains(opts.Runtimes, RuntimeOllama) {
		var err error
		if store, err = importOllama(ctx, opts); err != nil {
			return err
		}
		defer store.Close()
	}
	names := slices.Sorted(maps.Keys(opts.Models))
	var rows []BenchRow
	for _, rt := range opts.Runtimes {
		for _, name := range names {
			path := opts.Models[name]
			f, err := Open(path)
			if err != nil {
				return err
			}
			h, err := ReadHParams(f)
			if err != nil {
				return err
			}
			ref, err := gp.ParseGGUFFile(path)
			if err != nil {
				return fmt.Errorf("preflight: gguf-parser-go reads %s: %w", path, err)
			}
			for _, c := range opts.Contexts {
				for _, kv := range opts.KVTypes {
					p := Profile{Name: fmt.Sprintf("bench-%d-%s", c, kv), CardMemory: opts.Limit, Context: c, KVType: kv, Parallel: 1, Simulated: true}
					row := BenchRow{Model: name, Runtime: rt, Context: c, KV: kv, vocab: h.Vocab}
					est, err := Predict(f, p, rt, cal)
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
						opts.Logger.Info("bench run", "runtime", rt, "model", name, "ctx", c, "kv", kv, "repeat", rep)
						var peak Size
						var bufs Buffers
						if rt == RuntimeOllama {
							peak, r.Own, bufs, err = measureOllama(ctx, opts, store, name, p)
						} else {
							r.Own = llamaOwnEstimate(ctx, opts, path, p)
							peak, bufs, err = measureLlamaServer(ctx, opts, path, p)
						}
						r.Logged = bufs
						if err != nil {
							r.Err = err.Error()
							opts.Logger.Warn("bench run failed", "runtime", rt, "model", name, "ctx", c, "kv", kv, "err", err)
						}
						r.Measured = peak
						rows = append(rows, r)
						fmt.Fprintf(w, "measured %s %s ctx %d kv %s%s: peak %s (rig %s, gguf-parser %s, %s's own %s)\n", rt, name, c, kv, repeat, peak, r.Rig, r.Parser, rt, r.Own)
					}
				}
			}
		}
	}
	if opts.Fit {
		fitted, err := fitCalibration(cal, rows, opts.Machine)
		if err != nil {
			return err
		}
		for _, rt := range opts.Runtimes {
			rc := fitted.Runtimes[rt]
			fmt.Fprintf(w, "fitted %s: base %s, %.0f bytes per vocabulary entry, relative error %.1f%% over %d runs (repeat spread %.1f%%)\n", rt, Size(rc.BaseBytes), rc.PerVocabBytes, 100*rc.RelError, rc.Runs, 100*rc.RepeatSpread)
		}
		for i := range rows {
			rc := fitted.Runtimes[rows[i].Runtime]
			rows[i].Rig = rows[i].parts + Size(rc.BaseBytes+rc.PerVocabBytes*float64(rows[i].vocab))
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
			return fmt.Errorf("preflight: write bench table: %w", err)
		}
	}
	return nil
}

// llamaOwnEstimate is llama.cpp's own projection of the run: llama-fit-params
// when it is built, else llama-server's fit dry run; 0 when neither answers.
func llamaOwnEstimate(ctx context.Context, opts BenchOptions, path string, p Profile) Size {
	if opts.FitParamsBin != "" {
		fp, _, err := FitPrint(ctx, opts.FitParamsBin, path, p)
		if err != nil {
			opts.Logger.Warn("llama-fit-params", "err", err)
		}
		return fp
	}
	fp, _, err := FitDryRun(ctx, opts.LlamaServerBin, path, p)
	if err != nil {
		opts.Logger.Warn("llama-server fit dry run", "err", err)
	}
	return fp
}

func relErr(pred, meas Size) float64 {
	if meas == 0 || pred == 0 {
		return math.NaN()
	}
	return (float64(pred) - float64(meas)) / float64(meas)
}

// parserEstimate is gguf-parser-go's host-memory estimate for a CPU-only
// llama.cpp run without mmap.
func parserEstimate(ref *gp.GGUFFile, p Profile) Size {
	kt := gp.GGMLTypeF16
	if p.KVGGMLType() == TypeQ8_0 {
		kt = gp.GGMLTypeQ8_0
	} else if p.KVGGMLType() == TypeQ4_0 {
		kt = gp.GGMLTypeQ4_0
	}
	e := ref.EstimateLLaMACppRun(
		gp.WithLLaMACppContextSize(int32(p.Context*p.slots())),
		gp.WithParallelSize(int32(p.slots())),
		gp.WithLLaMACppCacheKeyType(kt),
		gp.WithLLaMACppCacheValueType(kt),
		gp.WithLLaMACppOffloadLayers(0),
		gp.WithFlashAttention(),
	)
	s := e.Summarize(false, 0, 0)
	if len(s.Items) == 0 {
		return 0
	}
	return Size(s.Items[0].RAM.NonUMA)
}

// FitPrint asks llama.cpp itself (llama-fit-params --fit-print on, a dry run
// that builds the model and context without allocating) what the run needs,
// and returns the host total and the raw answer as evidence.
func FitPrint(ctx context.Context, fitBin, model string, p Profile) (Size, Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := []string{"--fit-print", "on", "-m", model, "-c", strconv.Itoa(p.Context * p.slots()), "-np", strconv.Itoa(p.slots()),
		"--cache-type-k", p.kvType(), "--cache-type-v", p.kvType(), "-ngl", "0"}
	cmd := exec.CommandContext(ctx, fitBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ev := Evidence{Source: "llama-fit-params --fit-print on " + strings.Join(args[2:], " ")}
	if err := cmd.Run(); err != nil {
		ev.Output = tail(stderr.String(), 2000)
		return 0, ev, fmt.Errorf("preflight: llama-fit-params: %w: %s", err, tail(stderr.String(), 400))
	}
	ev.Output = stdout.String()
	var total float64
	for _, line := range strings.Split(stdout.String(), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 4 {
			continue
		}
		for _, x := range fs[len(fs)-3:] {
			v, err := strconv.ParseFloat(x, 64)
			if err == nil {
				total += v
			}
		}
	}
	ev.Says = fmt.Sprintf("model + context + compute = %.0f MiB (device lines: %s)", total, strings.Join(strings.Fields(strings.ReplaceAll(stdout.String(), "\n", "; ")), " "))
	return Size(total * float64(MiB)), ev, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

var bufferLine = regexp.MustCompile(`(model|KV|compute|output) buffer size =\s+([0-9.]+) MiB`)

func parseBuffers(log string) Buffers {
	var b Buffers
	for _, m := range bufferLine.FindAllStringSubmatch(log, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		s := Size(v * float64(MiB))
		switch m[1] {
		case "model":
			b.Model += s
		case "KV":
			b.KV += s
		case "compute":
			b.Compute += s
		case "output":
			b.Output += s
		}
	}
	return b
}

// measureLlamaServer starts llama-server in a fresh reservation, waits for
// it to load, sends one short completion over loopback and reads the peak.
func measureLlamaServer(ctx context.Context, opts BenchOptions, model string, p Profile) (Size, Buffers, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.RunTimeout)
	defer cancel()
	if err := warmFile(model); err != nil {
		return 0, Buffers{}, err
	}
	r, err := Reserve(ctx, opts.Limit)
	if err != nil {
		return 0, Buffers{}, err
	}
	defer r.Close()
	port, err := freePort()
	if err != nil {
		return 0, Buffers{}, err
	}
	// --load-mode none (no mmap): weights are read into the group's own memory, so the peak
	// does not depend on what the page cache already held. --fit off: the
	// run must not shrink itself to fit (a pin holds for the whole run).
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(port), "-m", model,
		"-c", strconv.Itoa(p.Context * p.slots()), "-np", strconv.Itoa(p.slots()),
		"--cache-type-k", p.kvType(), "--cache-type-v", p.kvType(), "--load-mode", "none", "--fit", "off", "-ngl", "0", "-lv", "4"}
	cmd := r.Command(ctx, opts.LlamaServerBin, args...)
	var logBuf syncBuffer
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "LLAMA_ARG_THREADS=2")
	if err := cmd.Start(); err != nil {
		return 0, Buffers{}, fmt.Errorf("preflight: start llama-server: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 2 * time.Minute}
	ready := false
	for !ready {
		select {
		case err := <-done:
			peak, _ := r.Peak()
			oom, _ := r.OOM()
			return peak, parseBuffers(logBuf.String()), fmt.Errorf("llama-server exited before ready (%v, oom kills %d): %s", err, oom.Kills, tail(logBuf.String(), 600))
		case <-ctx.Done():
			stop()
			return 0, parseBuffers(logBuf.String()), ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := client.Get(base + "/health")
		if err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
	}
	body := fmt.Sprintf(`{"prompt": %q, "n_predict": 16, "temperature": 0}`, benchPrompt(p.Context))
	resp, err := client.Post(base+"/completion", "application/json", strings.NewReader(body))
	if err != nil {
		stop()
		return 0, parseBuffers(logBuf.String()), fmt.Errorf("completion: %w", err)
	}
	respBody, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	peak, perr := r.Peak()
	stop()
	if resp.StatusCode != http.StatusOK {
		return peak, parseBuffers(logBuf.String()), fmt.Errorf("completion: HTTP %d: %s", resp.StatusCode, tail(string(respBody), 300))
	}
	return peak, parseBuffers(logBuf.String()), perr
}

// benchPrompt is longer than one physical batch (512 tokens), so it touches
// every page of the compute buffer as a real task's prompt does; a one-line
// prompt would leave it partly untouched and flatter the measurement.
func benchPrompt(context int) string {
	return strings.Repeat("The quick brown fox jumps over the lazy dog. ", min(120, context/16))
}

// warmFile reads path once from outside the reservation, so its page cache
// is charged there and the measured peak is what the runtime allocates, not
// whether the file happened to be cached.
func warmFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("preflight: bench: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(io.Discard, f); err != nil {
		return fmt.Errorf("preflight: bench: read %s: %w", path, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// fitCalibration sets each measured runtime's overhead (base + per
// vocabulary entry) by least squares on measured − predicted-without-overhead,
// and its relative error to the largest one left. Runtimes without a good
// measurement keep their constants.
func fitCalibration(cal *Calibration, rows []BenchRow, machine string) (*Calibration, error) {
	out := *cal
	out.Runtimes = maps.Clone(cal.Runtimes)
	if out.Runtimes == nil {
		out.Runtimes = map[string]RuntimeCalibration{}
	}
	byRuntime := map[string][]BenchRow{}
	for _, r := range rows {
		if r.Err == "" && r.Measured > 0 {
			byRuntime[r.Runtime] = append(byRuntime[r.Runtime], r)
		}
	}
	if len(byRuntime) == 0 {
		return nil, errors.New("preflight: fit: no good measurements")
	}
	var fitted []string
	for _, rt := range slices.Sorted(maps.Keys(byRuntime)) {
		good := byRuntime[rt]
		if len(good) < 2 {
			return nil, fmt.Errorf("preflight: fit %s: %d good measurements; need at least 2", rt, len(good))
		}
		xs, ys := make([]float64, len(good)), make([]float64, len(good))
		for i, r := range good {
			xs[i], ys[i] = float64(r.vocab), float64(r.Measured)-float64(r.parts)
		}
		a, b := leastSquares(xs, ys)
		if b < 0 {
			a, b = mean(ys), 0 // a negative per-entry cost is noise: keep a constant
		}
		rc, ok := out.Runtimes[rt]
		if !ok {
			return nil, fmt.Errorf("preflight: fit %s: the calibration has no entry to start from (add runtimes.%s with ubatch, ctx_pad and compute_scale)", rt, rt)
		}
		rc.BaseBytes, rc.PerVocabBytes = math.Round(a), math.Round(b*10)/10
		worst := 0.0
		for _, r := range good {
			pred := float64(r.parts) + rc.BaseBytes + rc.PerVocabBytes*float64(r.vocab)
			worst = max(worst, math.Abs(pred-float64(r.Measured))/float64(r.Measured))
		}
		// The trusted margin is the worst error seen plus the repeat spread,
		// rounded up, and never below 3%: a handful of runs cannot show a
		// tighter bound.
		rc.RepeatSpread = repeatSpread(good)
		rc.RelError = max(0.03, math.Ceil((worst+rc.RepeatSpread)*100)/100)
		rc.Runs = len(good)
		out.Runtimes[rt] = rc
		fitted = append(fitted, fmt.Sprintf("%s over %d runs", rt, len(good)))
	}
	out.Date = time.Now().UTC().Format("2006-01-02")
	out.Machine = machine
	out.Source = "rig bench preflight fit: " + strings.Join(fitted, ", ")
	if len(fitted) < len(out.Runtimes) {
		out.Source += "; the other runtimes' constants as before (" + cal.Source + ")"
	}
	return &out, nil
}

// repeatSpread is the widest (max-min)/mean of the peaks measured for one
// configuration (model, context, KV type) measured more than once; 0 when
// none was repeated.
func repeatSpread(rows []BenchRow) float64 {
	type config struct {
		model string
		ctx   int
		kv    string
	}
	peaks := map[config][]float64{}
	for _, r := range rows {
		if r.Repeat == 0 {
			continue
		}
		k := config{r.Model, r.Context, r.KV}
		peaks[k] = append(peaks[k], float64(r.Measured))
	}
	widest := 0.0
	for _, v := range peaks {
		if len(v) < 2 {
			continue
		}
		widest = max(widest, (slices.Max(v)-slices.Min(v))/mean(v))
	}
	return widest
}

func leastSquares(x, y []float64) (a, b float64) {
	mx, my := mean(x), mean(y)
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return my, 0
	}
	b = sxy / sxx
	return my - b*mx, b
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func benchTable(rows []BenchRow, cal *Calibration, machine string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Preflight accuracy, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "machine: %s\n\n", machine)
	fmt.Fprintf(&b, "calibration: %s on %s\n\n", cal.Date, cal.Machine)
	fmt.Fprintf(&b, "Measured = cgroup v1/v2 peak of the runtime's whole process tree, CPU only, one slot, one completion of a ~1200-token prompt; the model file is in the page cache beforehand, so the peak counts what the runtime itself allocates. ")
	fmt.Fprintf(&b, "llama-server: --load-mode none, --fit off. Ollama: `ollama serve` and its runner, OLLAMA_FLASH_ATTENTION=1, OLLAMA_KV_CACHE_TYPE and num_ctx as the row says. ")
	fmt.Fprintf(&b, "Error = (predicted − measured) / measured. own = the runtime's own estimate: for llama-server llama.cpp's fit projection (`llama-fit-params --fit-print on`, or `llama-server --fit on` dry run: model + context + compute, no runtime overhead); for Ollama the loaded model's size as its scheduler counts it (/api/ps size, its log's \"total memory\").\n\n")
	fmt.Fprintf(&b, "| model | runtime | ctx | kv | measured MiB | rig MiB | rig err | gguf-parser MiB | parser err | own MiB | own err | logged model/KV/compute MiB |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	type sums struct {
		rig, parser, own, worst float64
		n, nOwn                 int
	}
	per := map[string]*sums{}
	var order []string
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | failed: %s | %.0f | | %.0f | | %.0f | | |\n", r.Model, r.Runtime, r.Context, r.KV, strings.ReplaceAll(tail(r.Err, 120), "|", "/"), r.Rig.MiBf(), r.Parser.MiBf(), r.Own.MiBf())
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.0f | %.0f | %+.1f%% | %.0f | %+.1f%% | %.0f | %s | %.0f/%.0f/%.0f |\n",
			r.Model, r.Runtime, r.Context, r.KV, r.Measured.MiBf(), r.Rig.MiBf(), 100*r.RigErr, r.Parser.MiBf(), 100*r.ParserErr,
			r.Own.MiBf(), pct(r.OwnErr), r.Logged.Model.MiBf(), r.Logged.KV.MiBf(), r.Logged.Compute.MiBf())
		s := per[r.Runtime]
		if s == nil {
			s = &sums{}
			per[r.Runtime] = s
			order = append(order, r.Runtime)
		}
		s.rig += math.Abs(r.RigErr)
		s.parser += math.Abs(r.ParserErr)
		s.worst = max(s.worst, math.Abs(r.RigErr))
		s.n++
		if !math.IsNaN(r.OwnErr) {
			s.own += math.Abs(r.OwnErr)
			s.nOwn++
		}
	}
	if len(order) > 0 {
		b.WriteString("\n")
	}
	for _, rt := range order {
		s := per[rt]
		fmt.Fprintf(&b, "%s, mean |error| over %d runs: rig %.1f%%, gguf-parser-go %.1f%%", rt, s.n, 100*s.rig/float64(s.n), 100*s.parser/float64(s.n))
		if s.nOwn > 0 {
			fmt.Fprintf(&b, ", %s's own %.1f%%", rt, 100*s.own/float64(s.nOwn))
		}
		fmt.Fprintf(&b, "; rig worst %.1f%% (goal: within 10%% in every case)", 100*s.worst)
		var good []BenchRow
		for _, r := range rows {
			if r.Runtime == rt && r.Err == "" {
				good = append(good, r)
			}
		}
		if spread := repeatSpread(good); spread > 0 {
			fmt.Fprintf(&b, "; widest spread between repeats of one configuration %.1f%%", 100*spread)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%s\n", SimulatedCaveat)
	return b.String()
}

func pct(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*f)
}

// syncBuffer is a bytes.Buffer safe for the process's two output streams.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// newCommand is exec.CommandContext; a seam so the dry run and the
// measurement start processes the same way.
func newCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, name, args...)
}
