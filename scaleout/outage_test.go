package scaleout

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/internal/testenv"
	"rig/replay"
	"rig/studies"
)

// syncBuffer is a log both the test and the processes' goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeOutageTrials is a fake trial in place of the runner (the engine, the
// workflows, the coordinator and the worker's keeping of its result are
// the real ones): it beats as the worker's runner does and leaves an honest
// spool entry. The trials of repeat 2 run until the engine is down, then
// finish during the outage, after finishAfter of their task.
type fakeOutageTrials struct {
	t           *testing.T
	spool       string
	down        chan struct{} // closed when the engine is killed
	finishAfter map[string]time.Duration
	mu          sync.Mutex
	runs        map[string]int       // attempts run, by key
	finished    map[string]time.Time // when each trial's entry was whole
}

func (f *fakeOutageTrials) run(ctx context.Context, in TrialInput) (TrialResult, error) {
	key, err := studies.ParseTrialKey(in.Key)
	if err != nil {
		return TrialResult{}, err
	}
	f.mu.Lock()
	f.runs[in.Key]++
	f.mu.Unlock()
	stop := heartbeat(ctx, attemptBeat{Key: in.Key, Worker: "w1", Started: time.Now().UTC()})
	defer stop()
	if key.Repeat == 2 {
		select {
		case <-f.down:
		case <-ctx.Done():
			return TrialResult{}, ctx.Err()
		}
		time.Sleep(f.finishAfter[key.Task])
	}
	tr := writeEntryOf(f.t, f.spool, key, in.Attempt, "w1", map[string]string{"capital": "Paris", "sum": "4"}[key.Task], nil)
	f.mu.Lock()
	f.finished[in.Key] = time.Now()
	f.mu.Unlock()
	return tr, nil
}

func (f *fakeOutageTrials) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k := range f.runs {
		if _, done := f.finished[k]; !done {
			n++
		}
	}
	return n
}

// On the real dev server, killed and restarted on its database outage
// later, with two trials that finish 0.2 s and 1.6 s after the kill: no
// trial that finished during the outage is run again, every planned trial
// is counted once, at its first attempt, and no generation row is in the
// record twice. An outage past the attempt's heartbeat timeout (20 s)
// closes the attempt in the engine: the worker's result then comes in
// through its report (ReportWorkflow), which the test sees in the engine.
// The three outages run at once, each on its own dev server, fixture and
// fake worker: they mostly wait, and one after another they held make test
// for six minutes.
func TestFinishedTrialSurvivesEngineOutage(t *testing.T) {
	for _, outage := range []time.Duration{15 * time.Second, 60 * time.Second, 300 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			if outage > time.Minute {
				testenv.Long(t, "a "+outage.String()+" outage of the real Temporal dev server")
			}
			t.Parallel()
			engineOutage(t, outage)
		})
	}
}

func engineOutage(t *testing.T, outage time.Duration) {
	_, f, spool := mergeFixture(t)
	ctx := context.Background()
	s := startDevServer(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	defer func() {
		if t.Failed() {
			t.Logf("coordinator and worker log:\n%s", logs.String())
		}
	}()
	cfg := Config{Address: s.Address(), Spool: spool}
	c, err := NewCoordinator(ctx, cfg, t.TempDir(), f, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	trials := &fakeOutageTrials{t: t, spool: spool, down: make(chan struct{}), runs: map[string]int{}, finished: map[string]time.Time{},
		finishAfter: map[string]time.Duration{"capital": 200 * time.Millisecond, "sum": 1600 * time.Millisecond}}
	cl, err := cfg.Dial(ctx, "w1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	d, err := f.snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	out := newOutbox(cl, "w1", log)
	tw := worker.New(cl, Queue("llama-server", binarySHA, ArmCardClass(d, *d.Arm("a"))), worker.Options{DisableWorkflowWorker: true})
	RegisterTrialActivity(tw, out.trialActivity(trials.run))
	// The fake worker takes 4 at once, as a rig worker would advertise.
	advertiseFake(t, spool, "w1", map[string]int{Queue("llama-server", binarySHA, ArmCardClass(d, *d.Arm("a"))): 4})
	if err := tw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tw.Stop(); out.close(time.Second) })

	in := StudyInput{Study: "s1", Execution: "exec-2", DesignHash: f.snap.DesignHash, Coordinator: c.Queue(), Chunk: 10, InFlight: 4, ChunksAtOnce: 1,
		StartWait: DefaultStartWait}
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(in.Study, in.Execution), TaskQueue: c.Queue()}, StudyWorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	counted := func() int {
		n, err := f.st.Counted(ctx, "exec-2")
		if err != nil {
			t.Fatal(err)
		}
		return len(n)
	}
	waitFor(t, "the repeat-1 trials merged and the repeat-2 trials running", time.Minute, func() bool { return counted() == 2 && trials.running() == 2 })
	time.Sleep(3 * time.Second) // their first beats reach the engine

	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	killed := time.Now()
	close(trials.down)
	time.Sleep(outage)
	if err := s.Start(ctx); err != nil {
		t.Fatalf("restarting the dev server on its database: %v", err)
	}
	t.Logf("engine killed, restarted %s later", time.Since(killed).Round(100*time.Millisecond))
	waitFor(t, "all four trials counted after the restart", 4*time.Minute, func() bool { return counted() == 4 })
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var res StudyResult
	if err := wr.Get(rctx, &res); err != nil {
		t.Fatalf("the run did not end after the restart: %v", err)
	}

	trials.mu.Lock()
	for k, n := range trials.runs {
		if n != 1 {
			t.Errorf("trial %s ran %d times; want once (it finished %s after the kill)", k, n, trials.finished[k].Sub(killed).Round(100*time.Millisecond))
		}
		if at := trials.finished[k]; at.After(killed) {
			t.Logf("trial %s finished %s after the kill", k, at.Sub(killed).Round(100*time.Millisecond))
		}
	}
	trials.mu.Unlock()
	if res.Counted != 4 || res.Retried != 0 || res.Errors != 0 {
		t.Errorf("the workflow's result %+v; want 4 counted, none retried", res)
	}
	rs, err := f.st.Receipts(ctx, "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Attempt != 1 || !r.Outcome.Counted() {
			t.Errorf("receipt %s attempt %d is %s (%s); want each trial counted at its first attempt", r.Trial(), r.Attempt, r.Outcome, r.Detail)
		}
	}
	if len(rs) != 4 {
		t.Errorf("%d receipts; want 4, one per planned trial", len(rs))
	}
	record := layout.Records(f.ExecDir("s1", "exec-2")).Generation("a")
	if n := recordRows(t, record); n != 4 {
		t.Errorf("%s holds %d rows; want 4, one per trial", record, n)
	}
	if _, matched, err := replay.CheckReceipts(record, replay.SumsOf(rs, "a")); err != nil {
		t.Errorf("the receipts' generation_sha256 against the record: %v", err)
	} else {
		t.Logf("record: %s", matched)
	}

	// Past the heartbeat timeout the engine closed both attempts: their
	// results came in through their worker's reports.
	for _, task := range []string{"capital", "sum"} {
		key := studies.TrialKey{Arm: "a", JobKind: "qa", Task: task, Repeat: 2}
		id := ReportWorkflowID(TrialResult{Study: "s1", Execution: "exec-2", Entry: entryName(key.String(), 1, "w1")})
		_, err := cl.DescribeWorkflow(ctx, id, "")
		switch {
		case outage >= time.Minute && err != nil:
			t.Errorf("no report of %s after a %s outage (%v): how did its result come in?", key, outage, err)
		case err == nil:
			t.Logf("%s came in through its worker's report", key)
		default:
			t.Logf("%s came in through its own activity's completion", key)
		}
	}
	if strings.Contains(logs.String(), "attempt lost") {
		t.Errorf("an attempt was recorded lost:\n%s", logs.String())
	}
}

// recordRows counts a record's rows; a row twice is an error of the reader.
func recordRows(t *testing.T, path string) int {
	t.Helper()
	rd, err := genrecord.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := 0
	for {
		_, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		n++
	}
}
