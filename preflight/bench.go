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
	RunTimeout     time.Duration     // per run; default 3 minutes
	Logger         *slog.Logger
}

// BenchRow is one measured run beside the predictions.
type BenchRow struct {
	Model     string  `json:"model"`
	Runtime   string  `json:"runtime"`
	Context   int     `json:"context"`
	KV        string  `json:"kv"`
	Measured  Size    `json:"measured_peak"`
	Rig       Size    `json:"rig"`
	Parser    Size    `json:"gguf_parser"`
	LlamaFit  Size    `json:"llama_fit_print"` // llama-fit-params --fit-print: model + context + compute
	Logged    Buffers `json:"logged"`          // the buffers llama-server says it allocated
	RigErr    float64 `json:"rig_error"`
	ParserErr float64 `json:"parser_error"`
	FitErr    float64 `json:"llama_fit_error"`
	vocab     int
	parts     Size   // rig's prediction without the overhead
	Err       string `json:"error,omitempty"`
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

// BenchPreflight runs each model at each context and KV type on llama-server
// inside a Reservation, reads the cgroup's peak, and prints rig's prediction,
// gguf-parser-go's and llama.cpp's own fit estimate beside the measurement.
func BenchPreflight(ctx context.Context, w io.Writer, opts BenchOptions) error {
	if opts.LlamaServerBin == "" || len(opts.Models) == 0 {
		return errors.New("preflight: bench: LlamaServerBin and Models are required (see ~/.cache/rig/installed.env)")
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
		opts.RunTimeout = 3 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.FitParamsBin == "" {
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
	names := slices.Sorted(maps.Keys(opts.Models))
	var rows []BenchRow
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
				if err := ctx.Err(); err != nil {
					return err
				}
				p := Profile{Name: fmt.Sprintf("bench-%d-%s", c, kv), CardMemory: opts.Limit, Context: c, KVType: kv, Parallel: 1, Simulated: true}
				row := BenchRow{Model: name, Runtime: RuntimeLlamaServer, Context: c, KV: kv, vocab: h.Vocab}
				est, err := Predict(f, p, RuntimeLlamaServer, cal)
				if err != nil {
					return err
				}
				row.Rig = est.Peak
				row.parts = est.Peak - est.Overhead
				row.Parser = parserEstimate(ref, p)
				if opts.FitParamsBin != "" {
					if fp, _, err := FitPrint(ctx, opts.FitParamsBin, path, p); err == nil {
						row.LlamaFit = fp
					} else {
						opts.Logger.Warn("llama-fit-params", "err", err)
					}
				} else if fp, _, err := FitDryRun(ctx, opts.LlamaServerBin, path, p); err == nil {
					row.LlamaFit = fp
				} else {
					opts.Logger.Warn("llama-server fit dry run", "err", err)
				}
				opts.Logger.Info("bench run", "model", name, "ctx", c, "kv", kv)
				peak, bufs, err := measureLlamaServer(ctx, opts, path, p)
				row.Logged = bufs
				if err != nil {
					row.Err = err.Error()
					opts.Logger.Warn("bench run failed", "model", name, "ctx", c, "kv", kv, "err", err)
				}
				row.Measured = peak
				rows = append(rows, row)
				fmt.Fprintf(w, "measured %s ctx %d kv %s: peak %s (rig %s, gguf-parser %s, llama fit %s)\n", name, c, kv, peak, row.Rig, row.Parser, row.LlamaFit)
			}
		}
	}
	if opts.Fit {
		fitted, err := fitCalibration(cal, rows, opts.Machine)
		if err != nil {
			return err
		}
		rc := fitted.Runtimes[RuntimeLlamaServer]
		fmt.Fprintf(w, "fitted %s: base %s, %.0f bytes per vocabulary entry, relative error %.1f%%\n", RuntimeLlamaServer, Size(rc.BaseBytes), rc.PerVocabBytes, 100*rc.RelError)
		for i := range rows {
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
		r.RigErr, r.ParserErr, r.FitErr = relErr(r.Rig, r.Measured), relErr(r.Parser, r.Measured), relErr(r.LlamaFit, r.Measured)
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
	// A prompt longer than one physical batch (512) touches every page of
	// the compute buffer, as a real task's prompt does; a one-line prompt
	// would leave it partly untouched and flatter the measurement.
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", min(120, p.Context/16))
	body := fmt.Sprintf(`{"prompt": %q, "n_predict": 16, "temperature": 0}`, prompt)
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// fitCalibration sets the llama-server overhead (base + per vocabulary
// entry) by least squares on measured − predicted-without-overhead, and the
// relative error to the largest one left.
func fitCalibration(cal *Calibration, rows []BenchRow, machine string) (*Calibration, error) {
	var xs, ys []float64
	for _, r := range rows {
		if r.Err == "" && r.Measured > 0 {
			xs = append(xs, float64(r.vocab))
			ys = append(ys, float64(r.Measured)-float64(r.parts))
		}
	}
	if len(xs) < 2 {
		return nil, fmt.Errorf("preflight: fit: %d good measurements; need at least 2", len(xs))
	}
	a, b := leastSquares(xs, ys)
	if b < 0 {
		a, b = mean(ys), 0 // a negative per-entry cost is noise: keep a constant
	}
	out := *cal
	out.Runtimes = map[string]RuntimeCalibration{}
	for k, v := range cal.Runtimes {
		out.Runtimes[k] = v
	}
	rc := out.Runtimes[RuntimeLlamaServer]
	rc.BaseBytes, rc.PerVocabBytes = math.Round(a), math.Round(b*10)/10
	worst := 0.0
	n := 0
	for _, r := range rows {
		if r.Err != "" || r.Measured == 0 {
			continue
		}
		n++
		pred := float64(r.parts) + rc.BaseBytes + rc.PerVocabBytes*float64(r.vocab)
		worst = max(worst, math.Abs(pred-float64(r.Measured))/float64(r.Measured))
	}
	// The trusted margin is the worst error seen, rounded up, and never below
	// 3%: a handful of runs cannot show a tighter bound.
	rc.RelError = max(0.03, math.Ceil(worst*100)/100)
	rc.Runs = n
	out.Runtimes[RuntimeLlamaServer] = rc
	out.Date = time.Now().UTC().Format("2006-01-02")
	out.Machine = machine
	out.Source = "rig bench preflight fit over " + strconv.Itoa(n) + " runs"
	return &out, nil
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
	fmt.Fprintf(&b, "Measured = cgroup v1/v2 peak of llama-server's process tree (--load-mode none, --fit off, -np 1, CPU only, one /completion with a ~1200-token prompt). ")
	fmt.Fprintf(&b, "Error = (predicted − measured) / measured. llama fit = llama.cpp's own projection (`llama-server --fit on` dry run, or `llama-fit-params --fit-print on`): model + context + compute, no runtime overhead.\n\n")
	fmt.Fprintf(&b, "| model | runtime | ctx | kv | measured MiB | rig MiB | rig err | gguf-parser MiB | parser err | llama fit MiB | fit err | logged model/KV/compute MiB |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var sr, sp, sf float64
	var n, nf int
	worst := 0.0
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | failed: %s | %.0f | | %.0f | | %.0f | | |\n", r.Model, r.Runtime, r.Context, r.KV, strings.ReplaceAll(tail(r.Err, 120), "|", "/"), r.Rig.MiBf(), r.Parser.MiBf(), r.LlamaFit.MiBf())
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.0f | %.0f | %+.1f%% | %.0f | %+.1f%% | %.0f | %s | %.0f/%.0f/%.0f |\n",
			r.Model, r.Runtime, r.Context, r.KV, r.Measured.MiBf(), r.Rig.MiBf(), 100*r.RigErr, r.Parser.MiBf(), 100*r.ParserErr,
			r.LlamaFit.MiBf(), pct(r.FitErr), r.Logged.Model.MiBf(), r.Logged.KV.MiBf(), r.Logged.Compute.MiBf())
		sr += math.Abs(r.RigErr)
		sp += math.Abs(r.ParserErr)
		worst = max(worst, math.Abs(r.RigErr))
		n++
		if !math.IsNaN(r.FitErr) {
			sf += math.Abs(r.FitErr)
			nf++
		}
	}
	if n > 0 {
		fmt.Fprintf(&b, "\nmean |error|: rig %.1f%%, gguf-parser-go %.1f%%", 100*sr/float64(n), 100*sp/float64(n))
		if nf > 0 {
			fmt.Fprintf(&b, ", llama fit %.1f%%", 100*sf/float64(nf))
		}
		fmt.Fprintf(&b, "; rig worst %.1f%% (goal: within 10%% in every case)\n", 100*worst)
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
