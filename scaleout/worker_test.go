package scaleout

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"rig/internal/metrics"
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/runtimes"
)

// fakeReadyGates is a fake governor for these tests of the worker's
// polling: always ready, never preempting (the governor is tested alone).
type fakeReadyGates struct{}

func (fakeReadyGates) Ready(context.Context) error { return nil }
func (fakeReadyGates) Watch(context.Context, string, *runtimes.Sandbox, uint64) (run.TrialGuard, error) {
	return nil, errors.New("fake gates: no trial runs through the runner in these tests")
}

// fakeCardRuns is a fake trial attempt put in place of the runner (the
// worker's checks before it stay real): it holds the "card" for hold and
// records which worker ran which trial, when, and how many at once.
type fakeCardRuns struct {
	mu      sync.Mutex
	hold    time.Duration
	running map[string]int // by worker, now
	most    map[string]int // by worker, the most at once
	ran     map[string]fakeRun
}

type fakeRun struct {
	worker     string
	start, end time.Time
}

func newFakeCardRuns(hold time.Duration) *fakeCardRuns {
	return &fakeCardRuns{hold: hold, running: map[string]int{}, most: map[string]int{}, ran: map[string]fakeRun{}}
}

func (f *fakeCardRuns) attempt(id string) func(context.Context, TrialInput, string) (TrialResult, error) {
	return func(ctx context.Context, in TrialInput, _ string) (TrialResult, error) {
		f.mu.Lock()
		f.running[id]++
		f.most[id] = max(f.most[id], f.running[id])
		start := time.Now()
		f.mu.Unlock()
		select {
		case <-time.After(f.hold):
		case <-ctx.Done():
		}
		f.mu.Lock()
		f.running[id]--
		f.ran[in.Key] = fakeRun{worker: id, start: start, end: time.Now()}
		f.mu.Unlock()
		return TrialResult{Study: in.Study, Execution: in.Execution, Key: in.Key, Attempt: in.Attempt, Worker: id, Outcome: receipts.Scored}, ctx.Err()
	}
}

func (f *fakeCardRuns) get(key string) (fakeRun, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.ran[key]
	return r, ok
}

func (f *fakeCardRuns) runningOn(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[id]
}

// driverOutcome is what the test workflow saw of each trial.
type driverOutcome struct {
	Refusals map[string]int    // by trial key
	Errors   map[string]string // trials that ended in anything but a result or a refusal
}

// fakeTrialDriver is a test workflow standing in for the study workflow's
// handling of a trial: each trial on its own queue, one try, a refusal
// scheduled again (after 200 ms here; the real one waits refusalWait).
func fakeTrialDriver(ctx workflow.Context, trials []TrialInput) (driverOutcome, error) {
	out := driverOutcome{Refusals: map[string]int{}, Errors: map[string]string{}}
	wg := workflow.NewWaitGroup(ctx)
	for _, in := range trials {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			for range 100 {
				actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: in.Queue,
					StartToCloseTimeout: time.Minute, HeartbeatTimeout: 20 * time.Second,
					RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
				var res TrialResult
				err := workflow.ExecuteActivity(actx, actRunTrial, in).Get(ctx, &res)
				var app *temporal.ApplicationError
				switch {
				case err == nil:
					return
				case errors.As(err, &app) && app.Type() == ErrRefused:
					out.Refusals[in.Key]++
					_ = workflow.Sleep(ctx, 200*time.Millisecond)
				default:
					out.Errors[in.Key] = err.Error()
					return
				}
			}
			out.Errors[in.Key] = "refused 100 times"
		})
	}
	wg.Wait(ctx)
	return out, nil
}

// workerRig is the real dev server with the test workflow served, and a way
// to start real Workers on it with fake attempts.
type workerRig struct {
	t     *testing.T
	cfg   Config
	cl    client.Client
	in    provision.Installed
	quiet *slog.Logger
}

func newWorkerRig(t *testing.T) *workerRig {
	t.Helper()
	s := startDevServer(t)
	in, err := provision.Load()
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := Config{Address: s.Address(), Spool: t.TempDir()}
	cl, err := cfg.Dial(context.Background(), "test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	dw := worker.New(cl, "rig.test.driver", worker.Options{})
	dw.RegisterWorkflow(fakeTrialDriver)
	if err := dw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dw.Stop)
	return &workerRig{t: t, cfg: cfg, cl: cl, in: in, quiet: quiet}
}

// start runs a real Worker serving queues, its attempts f's fake.
func (r *workerRig) start(id string, in provision.Installed, f *fakeCardRuns, queues ...string) *Worker {
	r.t.Helper()
	w, err := NewWorker(context.Background(), WorkerOptions{Config: r.cfg, ID: id, WorkDir: r.t.TempDir(), Installed: in,
		Gates: fakeReadyGates{}, Log: r.quiet, Queues: queues})
	if err != nil {
		r.t.Fatal(err)
	}
	w.attempt = f.attempt(id)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	r.t.Cleanup(func() { cancel(); <-done })
	return w
}

func (r *workerRig) build(kind string) string {
	r.t.Helper()
	b, err := runtimes.BuildOf(r.in, kind)
	if err != nil {
		r.t.Fatalf("%s is not provisioned here (make setup): %v", kind, err)
	}
	return b.BinarySHA256
}

func (r *workerRig) trial(key, kind, model string) TrialInput {
	b := r.build(kind)
	return TrialInput{Study: "s", Execution: "exec-1", DesignHash: "h", Key: key, Attempt: 1, Queue: Queue(kind, b, "cpu"),
		Runtime: kind, BinarySHA256: b, ModelSHA256: model}
}

func (r *workerRig) drive(id string, trials ...TrialInput) client.WorkflowRun {
	r.t.Helper()
	wr, err := r.cl.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: "rig.test.driver"}, fakeTrialDriver, trials)
	if err != nil {
		r.t.Fatal(err)
	}
	return wr
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A worker serving two queues, with trials waiting on both, runs one and
// takes no second: the other worker takes it and runs it alongside. Before
// the shared slot, the first worker's second poller took the second trial
// and held it behind the first until that ended, while the other worker
// idled.
func TestMultiQueueWorkerTakesOneTrialAtATime(t *testing.T) {
	r := newWorkerRig(t)
	f := newFakeCardRuns(6 * time.Second)
	model := r.in.Models["smollm2-135m-instruct"].SHA256
	a := r.trial("arm-a/jk/t1/1", "llama-server", model)
	b := r.trial("arm-b/jk/t1/1", "ollama", model)
	w1 := r.start("w1", r.in, f, a.Queue, b.Queue)
	waitFor(t, "w1 polls", 20*time.Second, func() bool { return w1.Ready(context.Background()) == nil })

	wa := r.drive("slot-a", a)
	waitFor(t, "w1 runs the first trial", 20*time.Second, func() bool { return f.runningOn("w1") == 1 })
	wb := r.drive("slot-b", b)
	// The second trial waits while only the busy worker serves its queue.
	time.Sleep(1500 * time.Millisecond)
	if _, ok := f.get(b.Key); ok {
		t.Fatalf("the second trial ran while the only worker of its queue was busy: %+v", f.ran)
	}
	r.start("w2", r.in, f, a.Queue, b.Queue)

	var oa, ob driverOutcome
	if err := wa.Get(context.Background(), &oa); err != nil {
		t.Fatal(err)
	}
	if err := wb.Get(context.Background(), &ob); err != nil {
		t.Fatal(err)
	}
	if len(oa.Errors)+len(ob.Errors) > 0 {
		t.Fatalf("trials ended in errors (a lost attempt is one): %v %v", oa.Errors, ob.Errors)
	}
	ra, _ := f.get(a.Key)
	rb, ok := f.get(b.Key)
	if !ok || ra.worker != "w1" || rb.worker != "w2" {
		t.Fatalf("first trial on %q, second on %q (ran: %v): want w1 and w2", ra.worker, rb.worker, ok)
	}
	if !rb.start.Before(ra.end) {
		t.Errorf("the second trial started %s after the first ended: it waited for w1 instead of running on w2", rb.start.Sub(ra.end))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.most["w1"] != 1 || f.most["w2"] != 1 {
		t.Errorf("trials at once: w1 %d, w2 %d; want 1 each", f.most["w1"], f.most["w2"])
	}
	t.Logf("first trial on w1 %s–%s; second on w2 from %s; second trial's refusals (handed back by the busy w1): %d",
		ra.start.Format("15:04:05.000"), ra.end.Format("15:04:05.000"), rb.start.Format("15:04:05.000"), ob.Refusals[b.Key])
}

// A worker without a trial's model (by sha256: not provisioned in its
// cache, no models folder, not at the snapshot's path) refuses it, stops
// polling and says which model on /healthz; the healthy worker runs every
// trial, and none ends as a lost attempt.
func TestWorkerMissingAModelStopsPollingAndSaysWhich(t *testing.T) {
	r := newWorkerRig(t)
	f := newFakeCardRuns(300 * time.Millisecond)
	model := r.in.Models["smollm2-135m-instruct"].SHA256
	if model == "" {
		t.Fatal("provision pins no SmolLM2 sha256")
	}
	var trials []TrialInput
	for _, task := range []string{"t1", "t2", "t3", "t4"} {
		trials = append(trials, r.trial("smol/jk/"+task+"/1", "llama-server", model))
	}
	q := trials[0].Queue

	// The bad worker's cache has no models (another machine's provisioning
	// without them); it starts alone, so it takes a trial first.
	bare := r.in
	bare.Models, bare.OtherQuants = map[string]provision.Model{}, map[string]provision.Model{}
	bad := r.start("bad", bare, f, q)
	waitFor(t, "the bad worker polls", 20*time.Second, func() bool { return bad.Ready(context.Background()) == nil })
	wr := r.drive("models", trials...)
	waitFor(t, "the bad worker names the missing model", 20*time.Second, func() bool {
		err := bad.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), model)
	})
	good := r.start("good", r.in, f, q)

	var out driverOutcome
	if err := wr.Get(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) > 0 {
		t.Fatalf("trials ended in errors (a lost attempt is one): %v", out.Errors)
	}
	for _, in := range trials {
		if r, ok := f.get(in.Key); !ok || r.worker != "good" {
			t.Errorf("trial %s ran on %q (ran: %v), want the healthy worker", in.Key, r.worker, ok)
		}
	}
	refusals := 0
	for _, n := range out.Refusals {
		refusals += n
	}
	if refusals == 0 || refusals > 2 {
		t.Errorf("refusals: %d (%v); want the bad worker's one or two before it stops polling", refusals, out.Refusals)
	}

	for _, c := range []struct {
		w    *Worker
		code int
		want string
	}{{bad, http.StatusServiceUnavailable, model}, {good, http.StatusOK, "polling"}} {
		srv := httptest.NewServer(metrics.HealthHandler(c.w.Ready))
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("/healthz of %s: %d %q; want %d naming %q", c.w.ID(), resp.StatusCode, body, c.code, c.want)
		}
		t.Logf("/healthz of %s: %d %s", c.w.ID(), resp.StatusCode, strings.TrimSpace(string(body)))
	}
}

// A refusal is the normal case on a worker of several queues: the SDK must
// not log it at ERROR, and the workflow still reads it as a refusal that
// is not retried on this worker.
func TestRefusalIsBenign(t *testing.T) {
	var app *temporal.ApplicationError
	if err := refuse("worker %s: busy", "w1"); !errors.As(err, &app) {
		t.Fatalf("refuse gave %T, not an application error", err)
	}
	if app.Type() != ErrRefused || !app.NonRetryable() || app.Category() != temporal.ApplicationErrorCategoryBenign {
		t.Errorf("refusal: type %q, non-retryable %v, category %v; want %q, true, benign", app.Type(), app.NonRetryable(), app.Category(), ErrRefused)
	}
}
