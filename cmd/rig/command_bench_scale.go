package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"rig/internal/provision"
	"rig/scaleout"
	"rig/studies"
)

func newBenchScaleCommand() *cobra.Command {
	var fanout, overhead, tasks int
	var design string
	var skipThroughput bool
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure scale-out: throughput with 2 workers against 1, engine overhead per trial, a 100,000-trial fan-out",
		Long: `scale measures the scale-out engine on this machine, side by side in one run,
on a private Temporal dev server (127.0.0.1 only):

  throughput   the same small study (--tasks tasks of the quick example, two
               arms, real runtimes, each on one thread on a 2-core machine)
               run through the engine with 1 rig worker, then again with 2;
               the ratio of trials per minute (goal >= 1.7x)
  overhead     --overhead trials of the scheduling path alone (an activity
               that runs no model): from "activity scheduled" to "runner
               started", p50 and p99 (goal <= 50 ms and <= 200 ms)
  fan-out      a --fanout-trial plan (default 100,000) submitted and fanned out
               in chunks by the same workflows a study uses, the no-model
               activity in place of the trials: the time it takes and the
               history sizes against Temporal's limits

Throughput starts a daemon, registers, freezes, preflights and validates the
bench study in a temporary home: a few minutes. --skip-throughput leaves it out.

  rig bench scale
  rig bench scale --fanout 10000 --skip-throughput`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := provision.Load()
			if err != nil {
				return err
			}
			if in.Temporal == "" {
				return fmt.Errorf("installed.env names no TEMPORAL_BIN: run make setup (it builds the Temporal CLI)")
			}
			out := cmd.OutOrStdout()
			home, err := os.MkdirTemp("", "rig-bench-scale-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(home)
			ctx := cmd.Context()
			srv := &scaleout.DevServer{Bin: in.Temporal, Log: filepath.Join(home, "temporal.log")}
			if err := srv.Start(ctx); err != nil {
				return err
			}
			defer srv.Stop()
			fmt.Fprintf(out, "temporal dev server on %s (in memory)\n", srv.Address())
			var lines []string
			if !skipThroughput {
				l, err := benchThroughput(ctx, out, srv.Address(), home, design, tasks)
				if err != nil {
					return fmt.Errorf("throughput: %w", err)
				}
				lines = append(lines, l...)
			}
			l, err := benchScheduling(ctx, out, srv.Address(), home, overhead, fanout)
			if err != nil {
				return err
			}
			lines = append(lines, l...)
			fmt.Fprintln(out, "\nscale-out figures (one run, side by side):")
			for _, l := range lines {
				fmt.Fprintln(out, "  "+l)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&fanout, "fanout", 100000, "trials in the fan-out plan")
	cmd.Flags().IntVar(&overhead, "overhead", 2000, "no-model trials timed for the engine overhead")
	cmd.Flags().IntVar(&tasks, "tasks", 12, "tasks of the throughput study (two arms, one repeat)")
	cmd.Flags().StringVar(&design, "design", "examples/quick-study/design.json", "the design the throughput study is cut from")
	cmd.Flags().BoolVar(&skipThroughput, "skip-throughput", false, "leave out the real-runtime throughput run")
	return cmd
}

// benchScheduling times the engine alone: the overhead of handing a trial
// to a runner, and a large plan's fan-out.
func benchScheduling(ctx context.Context, out io.Writer, addr, home string, overhead, fanout int) ([]string, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := scaleout.Config{Address: addr, Spool: filepath.Join(home, "spool")}
	coord, err := scaleout.NewCoordinator(ctx, cfg, home, nil, log)
	if err != nil {
		return nil, err
	}
	defer coord.Close()
	queue := "rig.bench.no-model"
	var mu sync.Mutex
	var waits []time.Duration
	w := worker.New(coord.Client(), queue, worker.Options{MaxConcurrentActivityExecutionSize: 1000, MaxConcurrentActivityTaskPollers: 8, DisableWorkflowWorker: true})
	w.RegisterActivityWithOptions(func(ctx context.Context, in scaleout.TrialInput) (scaleout.TrialResult, error) {
		// From the engine's "scheduled" to the runner's start: what the
		// engine adds to every trial.
		wait := time.Since(activity.GetInfo(ctx).ScheduledTime)
		mu.Lock()
		waits = append(waits, wait)
		mu.Unlock()
		return scaleout.TrialResult{Key: in.Key, Attempt: in.Attempt, Worker: "bench", Outcome: "scored", Started: time.Now().UTC()}, nil
	}, activity.RegisterOptions{Name: scaleout.ActNoModel})
	if err := w.Start(); err != nil {
		return nil, err
	}
	defer w.Stop()
	runPlan := func(id string, n, inFlight, atOnce int) (time.Duration, scaleout.StudyResult, error) {
		start := time.Now()
		wr, err := coord.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: scaleout.WorkflowID("bench", id), TaskQueue: coord.Queue()}, scaleout.StudyWorkflowName,
			scaleout.StudyInput{Study: "bench", Execution: id, Coordinator: coord.Queue(), Chunk: scaleout.DefaultChunk, InFlight: inFlight,
				ChunksAtOnce: atOnce, NoModel: true, Synthetic: n, NoModelQueue: queue})
		if err != nil {
			return 0, scaleout.StudyResult{}, err
		}
		var res scaleout.StudyResult
		err = wr.Get(ctx, &res)
		return time.Since(start), res, err
	}

	var lines []string
	// One trial in flight is the engine's own latency; a study's default
	// window is a burst of them at each chunk's start.
	for i, inFlight := range []int{1, scaleout.DefaultInFlight} {
		n := overhead
		if inFlight == 1 {
			n = min(overhead, 500)
		}
		fmt.Fprintf(out, "overhead: %d no-model trials, %d in flight…\n", n, inFlight)
		if _, _, err := runPlan(fmt.Sprintf("overhead-%d", i), n, inFlight, 1); err != nil {
			return nil, err
		}
		mu.Lock()
		ov := slices.Clone(waits)
		waits = nil
		mu.Unlock()
		slices.Sort(ov)
		pct := func(p float64) time.Duration { return ov[min(len(ov)-1, int(p*float64(len(ov))))] }
		lines = append(lines, fmt.Sprintf("engine overhead per trial (scheduled → runner started), %d trials, %d in flight: p50 %s (goal ≤ 50ms), p99 %s (goal ≤ 200ms)",
			len(ov), inFlight, pct(0.50).Round(100*time.Microsecond), pct(0.99).Round(100*time.Microsecond)))
	}

	fmt.Fprintf(out, "fan-out: %d no-model trials in chunks of %d…\n", fanout, scaleout.DefaultChunk)
	el, res, err := runPlan("fanout", fanout, 256, 8)
	if err != nil {
		return nil, err
	}
	parent, err := historyOf(ctx, coord.Client(), scaleout.WorkflowID("bench", "fanout"))
	if err != nil {
		return nil, err
	}
	child, err := historyOf(ctx, coord.Client(), scaleout.WorkflowID("bench", "fanout")+"/chunk-0")
	if err != nil {
		return nil, err
	}
	chunks := (fanout + scaleout.DefaultChunk - 1) / scaleout.DefaultChunk
	lines = append(lines, fmt.Sprintf("fan-out of %d trials (%d chunks of %d): %s, %.0f trials/s through the engine; %d counted",
		fanout, chunks, scaleout.DefaultChunk, el.Round(time.Second), float64(fanout)/el.Seconds(), res.Counted),
		fmt.Sprintf("history: the parent %d events / %s, a chunk %d events / %s (Temporal's limits: 51,200 events and 50 MiB per workflow)",
			parent.events, mib(parent.bytes), child.events, mib(child.bytes)))
	return lines, nil
}

type history struct{ events, bytes int64 }

func historyOf(ctx context.Context, c client.Client, id string) (history, error) {
	d, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: "default", Execution: &commonpb.WorkflowExecution{WorkflowId: id}})
	if err != nil {
		return history{}, fmt.Errorf("describing %s: %w", id, err)
	}
	info := d.GetWorkflowExecutionInfo()
	return history{events: info.GetHistoryLength(), bytes: info.GetHistorySizeBytes()}, nil
}

func mib(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

// benchThroughput runs the same small study through the engine with one
// worker, then with two, on the real runtimes, and compares trials/min.
func benchThroughput(ctx context.Context, out io.Writer, addr, home, designPath string, tasks int) ([]string, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	raw, err := studies.ReadDesignFile(designPath)
	if err != nil {
		return nil, fmt.Errorf("%w (run rig bench scale from the repository, or name a design with --design)", err)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", designPath, err)
	}
	name := "bench-scale"
	d["name"], d["repeats"], d["allow_paths_outside"] = name, 1, true
	for _, k := range d["job_kinds"].([]any) {
		km := k.(map[string]any)
		if bank, ok := km["task_bank"].(string); ok && !filepath.IsAbs(bank) {
			abs, _ := filepath.Abs(filepath.Join(filepath.Dir(designPath), bank))
			km["task_bank"] = abs
		}
		km["sample_tasks"] = tasks
	}
	if p, ok := d["power"].(map[string]any); ok {
		p["task_count"] = tasks
	}
	dpath := filepath.Join(home, "design.json")
	b, _ := json.MarshalIndent(d, "", "  ")
	if err := os.WriteFile(dpath, b, 0o600); err != nil {
		return nil, err
	}
	rhome := filepath.Join(home, "rig")
	os.MkdirAll(rhome, 0o700)
	env := append(os.Environ(), "RIG_HOME="+rhome, "RIG_DAEMON_LOCK="+filepath.Join(rhome, "daemon.lock"))
	rig := func(args ...string) (string, error) {
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = env
		o, err := c.CombinedOutput()
		if err != nil {
			return string(o), fmt.Errorf("rig %s: %w\n%s", strings.Join(args, " "), err, o)
		}
		return string(o), nil
	}
	spool := filepath.Join(home, "spool")
	dm := exec.CommandContext(ctx, bin, "daemon", "--temporal", addr, "--spool", spool)
	dm.Env = env
	dlog, _ := os.Create(filepath.Join(home, "daemon.log"))
	defer dlog.Close()
	dm.Stdout, dm.Stderr = dlog, dlog
	if err := dm.Start(); err != nil {
		return nil, err
	}
	defer func() { dm.Process.Signal(syscall.SIGTERM); dm.Wait() }()
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("unix", filepath.Join(rhome, "rig.sock")); err == nil {
			c.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := rig("governor", "status"); err != nil {
		fmt.Fprintln(out, "throughput: the governor's fault suite first (counted runs need a pass)…")
		if _, err := rig("governor", "faults"); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(out, "throughput: registering, freezing, preflighting and validating a %d-task, two-arm study…\n", tasks)
	for _, args := range [][]string{{"study", "register", dpath},
		{"study", "review", name, "--verdict", "pass", "--licence-line", "all items allowed for evaluation and inference"},
		{"study", "approve", name}, {"study", "freeze", name}, {"study", "preflight", name}, {"study", "validate", name}} {
		if _, err := rig(args...); err != nil {
			return nil, err
		}
	}
	done := regexp.MustCompile(`done: (\d+)/(\d+) trials`)
	var rates []float64
	parent := ""
	for _, n := range []int{1, 2} {
		var ws []*exec.Cmd
		for i := 1; i <= n; i++ {
			w := exec.CommandContext(ctx, bin, "worker", "--temporal", addr, "--spool", spool, "--id", fmt.Sprintf("bench-%d-of-%d", i, n))
			w.Env = env
			wl, _ := os.Create(filepath.Join(home, fmt.Sprintf("worker-%d-of-%d.log", i, n)))
			w.Stdout, w.Stderr = wl, wl
			if err := w.Start(); err != nil {
				return nil, err
			}
			ws = append(ws, w)
		}
		fmt.Fprintf(out, "throughput: the study through %d worker(s)…\n", n)
		start := time.Now()
		var o string
		if parent == "" {
			o, err = rig("study", "run", name, "--engine", "temporal")
		} else {
			o, err = rig("study", "rerun", name, parent, "--engine", "temporal")
		}
		el := time.Since(start)
		for _, w := range ws {
			w.Process.Signal(syscall.SIGTERM)
			w.Wait()
		}
		if err != nil {
			return nil, err
		}
		m := done.FindStringSubmatch(o)
		if m == nil || m[1] != m[2] {
			return nil, fmt.Errorf("the run with %d worker(s) did not finish:\n%s", n, o)
		}
		trials := 0
		fmt.Sscan(m[1], &trials)
		rates = append(rates, float64(trials)/el.Minutes())
		fmt.Fprintf(out, "throughput: %d worker(s): %d trials in %s\n", n, trials, el.Round(time.Second))
		if id := regexp.MustCompile(`execution (exec-\d+) started`).FindStringSubmatch(o); id != nil {
			parent = id[1]
		}
	}
	return []string{fmt.Sprintf("throughput, same study, each runtime on one thread: 1 worker %.1f trials/min, 2 workers %.1f trials/min: %.2f× (goal ≥ 1.7×)",
		rates[0], rates[1], rates[1]/rates[0])}, nil
}
