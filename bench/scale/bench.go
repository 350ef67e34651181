package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"gonum.org/v1/gonum/stat"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"rig/api"
	"rig/internal/provision"
	"rig/scaleout"
	"rig/studies"
)

// Options is one `rig bench scale`.
type Options struct {
	// Bin is the rig binary the throughput run starts as its daemon and
	// workers.
	Bin string
	// Fanout and Overhead are the synthetic plans' sizes; Tasks the
	// throughput study's task count, cut from Design.
	Fanout, Overhead, Tasks int
	Design                  string
	SkipThroughput          bool
	// Workers is N of the throughput's 1 against N (default 2); Samples
	// how many runs of each, interleaved 1, N, 1, N, … (default 2), so a
	// machine whose load drifts moves both.
	Workers, Samples int
	// Fleet, when Fleet.Workers > 0, also runs the fleet of synthetic
	// workers (RunFleet) on the same server.
	Fleet FleetOptions
}

// Run measures the engine on a private Temporal dev server (127.0.0.1
// only), side by side in one run, and returns the figures' lines.
func Run(ctx context.Context, o Options, out io.Writer) ([]string, error) {
	srv, home, stop, err := startDevServer(ctx, "rig-bench-scale-", out)
	if err != nil {
		return nil, err
	}
	defer stop()
	var lines []string
	if !o.SkipThroughput {
		l, err := throughput(ctx, out, o, srv.Address(), home)
		if err != nil {
			return nil, fmt.Errorf("throughput: %w", err)
		}
		lines = append(lines, l...)
	}
	l, err := scheduling(ctx, out, srv.Address(), home, o.Overhead, o.Fanout)
	if err != nil {
		return nil, err
	}
	lines = append(lines, l...)
	if o.Fleet.Workers > 0 {
		dir := filepath.Join(home, "fleet")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		res, err := RunFleet(ctx, srv.Address(), dir, o.Fleet, out)
		if err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		lines = append(lines, res.Lines()...)
	}
	return lines, nil
}

// startDevServer starts a private, in-memory Temporal dev server (127.0.0.1
// only) in a new temporary folder named from prefix, and says where it
// listens; stop ends the server and removes the folder.
func startDevServer(ctx context.Context, prefix string, out io.Writer) (srv *scaleout.DevServer, dir string, stop func(), err error) {
	in, err := provision.Load()
	if err != nil {
		return nil, "", nil, err
	}
	if in.Temporal == "" {
		return nil, "", nil, fmt.Errorf("installed.env names no TEMPORAL_BIN: run make setup (it builds the Temporal CLI)")
	}
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return nil, "", nil, err
	}
	srv = &scaleout.DevServer{Bin: in.Temporal, Log: filepath.Join(dir, "temporal.log")}
	if err := srv.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	fmt.Fprintf(out, "temporal dev server on %s (in memory)\n", srv.Address())
	return srv, dir, func() { srv.Stop(); os.RemoveAll(dir) }, nil
}

// scheduling times the engine alone: the overhead of handing a trial to
// a runner, and a large plan's fan-out.
func scheduling(ctx context.Context, out io.Writer, addr, home string, overhead, fanout int) ([]string, error) {
	eng, err := Start(ctx, addr, filepath.Join(home, "spool"))
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	var lines []string
	// One trial in flight is the engine's own latency; a study's default
	// window is a burst of them at each chunk's start.
	for i, inFlight := range []int{1, scaleout.DefaultInFlight} {
		n := overhead
		if inFlight == 1 {
			n = min(overhead, 500)
		}
		fmt.Fprintf(out, "overhead: %d synthetic trials, %d in flight…\n", n, inFlight)
		if _, _, err := eng.Run(ctx, fmt.Sprintf("overhead-%d", i), n, inFlight, 1); err != nil {
			return nil, err
		}
		ov := eng.Waits()
		lines = append(lines, fmt.Sprintf("engine overhead per trial (scheduled → runner started), %d trials, %d in flight: p50 %s (goal ≤ 50ms), p99 %s (goal ≤ 200ms)",
			len(ov), inFlight, Percentile(ov, 0.50).Round(100*time.Microsecond), Percentile(ov, 0.99).Round(100*time.Microsecond)))
	}

	fmt.Fprintf(out, "fan-out: %d synthetic trials in chunks of %d…\n", fanout, scaleout.DefaultChunk)
	el, res, err := eng.Run(ctx, "fanout", fanout, 256, 8)
	if err != nil {
		return nil, err
	}
	eng.Waits()
	parent, err := eng.HistoryOf(ctx, "fanout", "")
	if err != nil {
		return nil, err
	}
	child, err := eng.HistoryOf(ctx, "fanout", "/chunk-0")
	if err != nil {
		return nil, err
	}
	chunks := (fanout + scaleout.DefaultChunk - 1) / scaleout.DefaultChunk
	lines = append(lines, fmt.Sprintf("fan-out of %d trials (%d chunks of %d): %s, %.0f trials/s through the engine; %d counted",
		fanout, chunks, scaleout.DefaultChunk, el.Round(time.Second), float64(fanout)/el.Seconds(), res.Counted),
		fmt.Sprintf("history: the parent %d events / %s, a chunk %d events / %s (Temporal's limits: 51,200 events and 50 MiB per workflow)",
			parent.Events, mib(parent.Bytes), child.Events, mib(child.Bytes)))
	return lines, nil
}

func mib(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

// throughput runs the same small study through the engine with one
// worker, then with two, on the real runtimes, and compares trials/min.
func throughput(ctx context.Context, out io.Writer, o Options, addr, home string) ([]string, error) {
	tasks := o.Tasks
	name, dpath, err := writeBenchDesign(o.Design, home, tasks)
	if err != nil {
		return nil, err
	}
	rhome := filepath.Join(home, "rig")
	os.MkdirAll(rhome, 0o700)
	r := benchRig{bin: o.Bin, addr: addr, home: home, spool: filepath.Join(home, "spool"),
		env: append(os.Environ(), "RIG_HOME="+rhome, "RIG_DAEMON_LOCK="+filepath.Join(rhome, "daemon.lock"))}
	dm := exec.CommandContext(ctx, r.bin, "daemon", "--temporal", addr, "--spool", r.spool)
	dm.Env = r.env
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
	if err := r.prepareStudy(ctx, out, dpath, name, tasks); err != nil {
		return nil, err
	}
	cl := api.NewClient(api.SocketIn(rhome))
	workers, samples := max(o.Workers, 2), max(o.Samples, 1)
	rates := map[int][]float64{}
	parent := ""
	var order []int
	for range samples {
		order = append(order, 1, workers)
	}
	for run, n := range order {
		info, el, err := r.timeRun(ctx, out, cl, name, parent, run, n)
		if err != nil {
			return nil, err
		}
		if info.Done != info.Planned || info.Planned == 0 {
			return nil, fmt.Errorf("the run with %d worker(s) ended %s with %d of %d trials done (%s)", n, info.Status, info.Done, info.Planned, info.Error)
		}
		rates[n] = append(rates[n], float64(info.Done)/el.Minutes())
		fmt.Fprintf(out, "throughput: %d worker(s): %d trials in %s\n", n, info.Done, el.Round(time.Second))
		parent = info.ID
	}
	one, many := meanSD(rates[1]), meanSD(rates[workers])
	return []string{fmt.Sprintf("throughput, same study, each runtime on one thread, %d interleaved samples each: 1 worker %.1f ± %.1f trials/min, %d workers %.1f ± %.1f trials/min: %.2f× (goal ≥ %.2f×, 0.85 of linear; every worker shares this machine's %d cores)",
		samples, one[0], one[1], workers, many[0], many[1], many[0]/one[0], 0.85*float64(workers), runtime.NumCPU())}, nil
}

// writeBenchDesign writes the bench study's design into home and returns
// the study's name and the design's path.
func writeBenchDesign(designPath, home string, tasks int) (name, dpath string, err error) {
	raw, err := studies.ReadDesignFile(designPath)
	if err != nil {
		return "", "", fmt.Errorf("%w (run rig bench scale from the repository, or name a design with --design)", err)
	}
	// The bench study is the design cut to --tasks tasks and one repeat,
	// its banks named by absolute path, since it is written elsewhere.
	d, err := studies.ParseDesign(designPath, raw)
	if err != nil {
		return "", "", err
	}
	name = "bench-scale"
	d.Name, d.Repeats, d.AllowPathsOutside = name, 1, true
	for i := range d.JobKinds {
		jk := &d.JobKinds[i]
		if !filepath.IsAbs(jk.TaskBank) {
			if jk.TaskBank, err = filepath.Abs(filepath.Join(filepath.Dir(designPath), jk.TaskBank)); err != nil {
				return "", "", err
			}
		}
		jk.SampleTasks = tasks
	}
	d.Power.TaskCount = tasks
	// One slot per arm, as the figures in docs/scale-out.md were taken: the
	// bench measures workers, not a runtime's batching.
	for i := range d.Arms {
		d.Arms[i].Pins.Slots = 1
	}
	dpath = filepath.Join(home, "design.json")
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(dpath, b, 0o600); err != nil {
		return "", "", err
	}
	return name, dpath, nil
}

// benchRig is the rig binary as the throughput bench runs it: in its own
// home, against the bench's Temporal server at addr.
type benchRig struct {
	bin, addr, home, spool string
	env                    []string
}

// rig runs one rig command to its end.
func (r benchRig) rig(ctx context.Context, args ...string) (string, error) {
	c := exec.CommandContext(ctx, r.bin, args...)
	c.Env = r.env
	o, err := c.CombinedOutput()
	if err != nil {
		return string(o), fmt.Errorf("rig %s: %w\n%s", strings.Join(args, " "), err, o)
	}
	return string(o), nil
}

// prepareStudy takes the bench study from its design to validated, after
// the governor's fault suite where this home has no pass yet.
func (r benchRig) prepareStudy(ctx context.Context, out io.Writer, dpath, name string, tasks int) error {
	if _, err := r.rig(ctx, "governor", "status"); err != nil {
		fmt.Fprintln(out, "throughput: the governor's fault suite first (counted runs need a pass)…")
		if _, err := r.rig(ctx, "governor", "faults"); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "throughput: registering, freezing, preflighting and validating a %d-task, two-arm study…\n", tasks)
	for _, args := range [][]string{{"study", "register", dpath},
		{"study", "review", name, "--verdict", "pass", "--licence-line", "all items allowed for evaluation and inference"},
		{"study", "approve", name}, {"study", "freeze", name}, {"study", "preflight", name}, {"study", "validate", name}} {
		if _, err := r.rig(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// timeRun runs the study once, as a child of parent, through n workers
// started for it and stopped after it, and times it.
func (r benchRig) timeRun(ctx context.Context, out io.Writer, cl api.Client, name, parent string, run, n int) (api.ExecInfo, time.Duration, error) {
	var ws []*exec.Cmd
	for i := 1; i <= n; i++ {
		w := exec.CommandContext(ctx, r.bin, "worker", "--temporal", r.addr, "--spool", r.spool, "--id", fmt.Sprintf("bench-%d-of-%d", i, n))
		w.Env = r.env
		wl, _ := os.Create(filepath.Join(r.home, fmt.Sprintf("worker-%d-of-%d.log", i, n)))
		w.Stdout, w.Stderr = wl, wl
		if err := w.Start(); err != nil {
			return api.ExecInfo{}, 0, err
		}
		ws = append(ws, w)
	}
	fmt.Fprintf(out, "throughput: the study through %d worker(s)…\n", n)
	start := time.Now()
	info, err := cl.Run(ctx, api.RunRequest{Study: name, Parent: parent, Engine: "temporal", Key: fmt.Sprintf("bench-scale-%d", run)})
	if err == nil {
		info, err = finished(ctx, cl, name, info.ID)
	}
	el := time.Since(start)
	for _, w := range ws {
		w.Process.Signal(syscall.SIGTERM)
		w.Wait()
	}
	return info, el, err
}

// meanSD is the mean and the sample standard deviation (0 for one sample,
// where gonum's is NaN).
func meanSD(xs []float64) [2]float64 {
	m, sd := stat.MeanStdDev(xs, nil)
	if len(xs) < 2 {
		sd = 0
	}
	return [2]float64{m, sd}
}

// finished follows execution id of study until it is no longer running.
func finished(ctx context.Context, cl api.Client, study, id string) (api.ExecInfo, error) {
	for {
		st, err := cl.Status(ctx, api.NameRequest{Name: study})
		if err != nil {
			return api.ExecInfo{}, err
		}
		for _, x := range st.Executions {
			if x.ID == id && x.Status != api.ExecStatusRunning {
				return x, nil
			}
		}
		select {
		case <-ctx.Done():
			return api.ExecInfo{}, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
