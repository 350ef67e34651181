package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"rig/receipts"
	"rig/studies"
)

// historiesDir holds recorded histories of the workflows as released: each
// must replay against the current code (TestReplayRecordedHistories), so a
// change that is not behind workflow.GetVersion fails here before it breaks
// a running study.
const historiesDir = "testdata/histories"

// fakeCoordinator is a fake of the coordinator's activities, for recording
// and testing the workflows' paths on a real Temporal server without a
// study store: its plan is the trials it is given, its merge takes a
// worker's outcome as sent, except for the keys it is told to fail.
type fakeCoordinator struct {
	trials []PlannedTrial
	// mergeFails: the merge of these keys fails (a spool entry that cannot
	// be brought in); recovered: the lost-attempt activity then finds the
	// entry whole and answers with its outcome.
	mergeFails, recovered map[string]bool
	// busy: queues whose workers are all taken (QueueServed says served).
	busy map[string]bool
	// stopAfter, when > 0, makes the plan a stopping one (chunks of whole
	// blocks) whose rule settles once this many trials count.
	stopAfter int
	// queueSlots, when > 0, is the count of advertised slots the fake
	// gives every queue at the chunk's start and with each merge or loss
	// (from v5 on; before, none).
	queueSlots int

	mu          sync.Mutex
	lost        []LostAttempt
	counted     map[string]bool
	queueChecks int
	checks      []StopCheck
}

func (c *fakeCoordinator) Plan(_ context.Context, in StudyInput) (PlanInfo, error) {
	size := max(in.Chunk, 1)
	if c.stopAfter > 0 {
		p := &studies.Plan{}
		for _, t := range c.trials {
			p.Trials = append(p.Trials, studies.Trial{Block: t.Block})
		}
		b := blockBounds(p, size)
		return PlanInfo{Trials: len(c.trials), Chunks: len(b), Stopping: true, Bounds: b}, nil
	}
	return PlanInfo{Trials: len(c.trials), Chunks: (len(c.trials) + size - 1) / size}, nil
}

func (c *fakeCoordinator) Chunk(_ context.Context, in ChunkInput) ([]PlannedTrial, error) {
	size := max(in.Chunk, 1)
	lo, hi := in.Index*size, min((in.Index+1)*size, len(c.trials))
	if in.Hi > 0 {
		lo, hi = in.Lo, min(in.Hi, len(c.trials))
	}
	if lo >= hi {
		return nil, nil
	}
	out := slices.Clone(c.trials[lo:hi])
	for j := range out {
		out[j].Index = lo + j
		out[j].QueueSlots = c.queueSlots
	}
	return out, nil
}

// CheckStop: the fake's rule settles once stopAfter trials count.
func (c *fakeCoordinator) CheckStop(_ context.Context, s StopCheck) (StopResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, s)
	n := len(c.counted)
	if c.stopAfter > 0 && n >= c.stopAfter {
		return StopResult{Stopped: true, Why: fmt.Sprintf("fake: settled at %d counted", n), NotRun: len(c.trials) - n}, nil
	}
	return StopResult{Why: fmt.Sprintf("fake: %d counted", n)}, nil
}

func (c *fakeCoordinator) Merge(_ context.Context, tr TrialResult) (MergeResult, error) {
	if c.mergeFails[tr.Key] {
		return MergeResult{}, temporal.NewNonRetryableApplicationError("fake: the spool entry of "+tr.Key+" is cut", ErrMismatch, nil)
	}
	c.count(tr.Key, tr.Outcome)
	return MergeResult{Outcome: tr.Outcome, QueueSlots: c.queueSlots}, nil
}

func (c *fakeCoordinator) RecordLost(_ context.Context, l LostAttempt) (MergeResult, error) {
	c.mu.Lock()
	c.lost = append(c.lost, l)
	c.mu.Unlock()
	if c.recovered[l.Key] && !l.Final {
		c.count(l.Key, receipts.Scored)
		return MergeResult{Outcome: receipts.Scored, Already: true, QueueSlots: c.queueSlots}, nil
	}
	if l.Final {
		return MergeResult{Outcome: receipts.Error, QueueSlots: c.queueSlots}, nil
	}
	return MergeResult{Outcome: receipts.Preempted, QueueSlots: c.queueSlots}, nil
}

// QueueServed: the fake serves the queues named in busy (their workers
// are taken), and no other.
func (c *fakeCoordinator) QueueServed(_ context.Context, q QueueCheck) (QueueState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queueChecks++
	return QueueState{Served: c.busy[q.Queue]}, nil
}

func (c *fakeCoordinator) count(key string, o receipts.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counted == nil {
		c.counted = map[string]bool{}
	}
	if o.Counted() {
		c.counted[key] = true
	}
}

// fakeTrials is a fake trial activity: each key's attempts answer from its
// script in turn ("refuse", "lose", "mismatch", "slow", or scored).
type fakeTrials struct {
	mu      sync.Mutex
	script  map[string][]string
	calls   map[string]int
	running map[string]int // by queue, now
	most    map[string]int // by queue, the most at once
	// all queues together: now, and the most at once
	runningAll, mostAll int
	// slots is each queue's worker's trials at once (0: the SDK's default)
	slots int
	// by queue: when its first trial began, and when its last one ended
	began, ended map[string]time.Time
}

func (f *fakeTrials) run(ctx context.Context, in TrialInput) (TrialResult, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls, f.running, f.most = map[string]int{}, map[string]int{}, map[string]int{}
		f.began, f.ended = map[string]time.Time{}, map[string]time.Time{}
	}
	if _, ok := f.began[in.Queue]; !ok {
		f.began[in.Queue] = time.Now()
	}
	i := f.calls[in.Key]
	f.calls[in.Key]++
	step := ""
	if s := f.script[in.Key]; i < len(s) {
		step = s[i]
	}
	f.running[in.Queue]++
	f.most[in.Queue] = max(f.most[in.Queue], f.running[in.Queue])
	f.runningAll++
	f.mostAll = max(f.mostAll, f.runningAll)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running[in.Queue]--
		f.runningAll--
		f.ended[in.Queue] = time.Now()
		f.mu.Unlock()
	}()
	switch step {
	case "refuse":
		return TrialResult{}, refuse("fake worker: not serving %s now", in.Queue)
	case "lose":
		return TrialResult{}, errors.New("fake worker: lost mid-trial")
	case "mismatch":
		return TrialResult{}, temporal.NewNonRetryableApplicationError("fake worker: the design hash differs", ErrMismatch, nil)
	case "slow":
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
			return TrialResult{}, ctx.Err()
		}
	}
	return TrialResult{Study: in.Study, Execution: in.Execution, Key: in.Key, Attempt: in.Attempt, Worker: "fake-" + in.Queue,
		Outcome: receipts.Scored, Started: time.Now().UTC()}, nil
}

// engineOnDevServer starts the real dev server and serves the coordinator
// queue with c and each trial queue with f's fake trial activity.
func engineOnDevServer(t *testing.T, c CoordinatorActivities, f *fakeTrials, queues ...string) (client.Client, string) {
	t.Helper()
	s := startDevServer(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, err := Config{Address: s.Address(), Spool: t.TempDir()}.Dial(context.Background(), "test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	coord := "rig.test.coordinator"
	cw := worker.New(cl, coord, worker.Options{})
	RegisterCoordinator(cw, c)
	ws := []worker.Worker{cw}
	for _, q := range queues {
		tw := worker.New(cl, q, worker.Options{DisableWorkflowWorker: true, MaxConcurrentActivityExecutionSize: f.slots})
		RegisterTrialActivity(tw, f.run)
		tw.RegisterActivityWithOptions(fakeReplayEntry, activity.RegisterOptions{Name: actReplay})
		ws = append(ws, tw)
	}
	for _, w := range ws {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	return cl, coord
}

func fakeReplayEntry(_ context.Context, study, execution string, e ReplayEntry) (ReplayResult, error) {
	return ReplayResult{ReplayEntry: e, Worker: "fake", Status: "reproduced", Replayed: 3, Reproduced: 3}, nil
}

// historyScenario is the plan the kept histories are recorded on: two
// chunks on two queues, with a refusal, a lost attempt, a merge recovered
// by the lost-attempt activity, a mismatch, a resumed (done) trial, and
// (from v1) a trial on a queue no worker serves. The v0 histories were
// recorded before that last trial was added.
func historyScenario() (*fakeCoordinator, *fakeTrials) {
	pt := func(i int, q string) PlannedTrial {
		return PlannedTrial{Key: fmt.Sprintf("a%d/jk/t%d/1", i%2, i), Queue: q, Attempt: 1, Runtime: "llama-server",
			BinarySHA256: strings.Repeat("ab", 32), ModelSHA256: strings.Repeat("cd", 32)}
	}
	c := &fakeCoordinator{trials: []PlannedTrial{pt(0, "rig.test.qa"), pt(1, "rig.test.qb"), pt(2, "rig.test.qa"), pt(3, "rig.test.qb"),
		pt(4, "rig.test.qa"), pt(5, "rig.test.qb")}}
	c.trials[5].Done = true
	c.trials = append(c.trials, pt(6, "rig.test.nobody"))
	c.mergeFails = map[string]bool{c.trials[2].Key: true}
	// From v5: each queue's workers advertise one slot.
	c.queueSlots = 1
	c.recovered = map[string]bool{c.trials[2].Key: true}
	f := &fakeTrials{script: map[string][]string{c.trials[0].Key: {"refuse"}, c.trials[1].Key: {"lose"}, c.trials[3].Key: {"mismatch"}}}
	return c, f
}

// saveHistory writes a workflow's whole history as the JSON the Temporal
// CLI writes (temporal workflow show --output json).
func saveHistory(t *testing.T, cl client.Client, id, file string) {
	t.Helper()
	it := cl.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(historiesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(historiesDir, file), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("kept %s: %d events", file, len(h.Events))
}

// TestRecordHistories records the workflows' histories for the replay test:
// it runs only with RIG_RECORD_HISTORIES=LABEL (the workflow version being
// released, such as v1), on the real dev server, and writes
// testdata/histories/LABEL-*.json. Histories already kept are never
// rewritten: a released version's histories stay as they were recorded.
func TestRecordHistories(t *testing.T) {
	label := os.Getenv("RIG_RECORD_HISTORIES")
	if label == "" {
		t.Skip("records workflow histories only with RIG_RECORD_HISTORIES=LABEL")
	}
	if m, _ := filepath.Glob(filepath.Join(historiesDir, label+"-*.json")); len(m) > 0 {
		t.Fatalf("histories labelled %s are kept already (%v): a released version's histories are never rewritten; pick a new label", label, m)
	}
	c, f := historyScenario()
	cl, coord := engineOnDevServer(t, c, f, "rig.test.qa", "rig.test.qb")
	ctx := context.Background()
	// Chunks of 3 (of 4 until v2): three chunks two at a time, so that a
	// chunk's share is handed on both to the next chunk and, at the end, to
	// the one still running (reshare-in-flight).
	in := StudyInput{Study: "hist", Execution: "exec-1", DesignHash: "sha256:fake", Coordinator: coord, Chunk: 3, InFlight: 2, ChunksAtOnce: 2,
		StartWait: 2 * time.Second}
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(in.Study, in.Execution), TaskQueue: coord}, StudyWorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	var res StudyResult
	if err := wr.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("study result: %+v", res)
	if res.Trials != 7 || res.Counted != 5 || res.Errors != 2 {
		t.Fatalf("the scenario ended as %+v, want 7 trials, 5 counted, 2 errors (a mismatch, an unserved queue)", res)
	}
	saveHistory(t, cl, wr.GetID(), label+"-study.json")
	for i := range (res.Trials + in.Chunk - 1) / in.Chunk {
		saveHistory(t, cl, fmt.Sprintf("%s/chunk-%d", wr.GetID(), i), fmt.Sprintf("%s-chunk-%d.json", label, i))
	}
	rin := ReplayInput{Study: "hist", Execution: "exec-1", Entries: []ReplayEntry{{Arm: "a0", Key: "a0/jk/t0/1", Attempt: 1, Queue: "rig.test.qa"},
		{Arm: "a1", Key: "a1/jk/t1/1", Attempt: 2, Queue: "rig.test.qb"}}}
	rr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID("hist", "exec-1") + "/replay", TaskQueue: coord}, ReplayWorkflowName, rin)
	if err != nil {
		t.Fatal(err)
	}
	var out []ReplayResult
	if err := rr.Get(ctx, &out); err != nil || len(out) != 2 {
		t.Fatalf("replay workflow: %v, %d results", err, len(out))
	}
	saveHistory(t, cl, rr.GetID(), label+"-replay.json")

	// A design with a stopping rule: four blocks, settled after the second.
	sc := &fakeCoordinator{trials: blockTrials(4), stopAfter: 8, queueSlots: 1}
	scl, scoord := engineOnDevServer(t, sc, &fakeTrials{}, "rig.test.qa", "rig.test.qb")
	sin := StudyInput{Study: "hist", Execution: "exec-stop", DesignHash: "sha256:fake", Coordinator: scoord, Chunk: 6, InFlight: 2, ChunksAtOnce: 2}
	sw, err := scl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(sin.Study, sin.Execution), TaskQueue: scoord}, StudyWorkflowName, sin)
	if err != nil {
		t.Fatal(err)
	}
	var sres StudyResult
	if err := sw.Get(ctx, &sres); err != nil || !sres.Stopped {
		t.Fatalf("the stopping scenario: %+v, %v", sres, err)
	}
	saveHistory(t, scl, sw.GetID(), label+"-stop-study.json")
	saveHistory(t, scl, sw.GetID()+"/chunk-0", label+"-stop-chunk-0.json")
}

// replayHistories replays every kept history against the workflows as
// registered now, and returns the workflow types it saw.
func replayHistories(t *testing.T) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no kept history under %s (record them with RIG_RECORD_HISTORIES=LABEL go test -run TestRecordHistories ./scaleout)", historiesDir)
	}
	quiet := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	seen := map[string]int{}
	for _, file := range files {
		raw, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(raw, client.HistoryJSONOptions{})
		raw.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(h.Events) == 0 || h.Events[0].GetWorkflowExecutionStartedEventAttributes() == nil {
			t.Fatalf("%s: not a whole history (its first event is not the workflow's start)", file)
		}
		seen[h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()]++
		r := worker.NewWorkflowReplayer()
		RegisterWorkflows(r)
		if err := r.ReplayWorkflowHistory(quiet, h); err != nil {
			t.Errorf("%s does not replay against the current workflows (a change not behind workflow.GetVersion? see docs/scale-out.md, Changing the workflows): %v", file, err)
		}
	}
	return seen
}

// TestReplayRecordedHistories replays every kept history (each released
// version's, testdata/histories) against the current workflow code: a
// change to a workflow that is not behind workflow.GetVersion makes its
// old histories non-deterministic, and this test fails.
func TestReplayRecordedHistories(t *testing.T) {
	seen := replayHistories(t)
	for _, name := range []string{StudyWorkflowName, ChunkWorkflowName, ReplayWorkflowName} {
		if seen[name] == 0 {
			t.Errorf("no kept history of workflow %s: record one (RIG_RECORD_HISTORIES=LABEL)", name)
		}
	}
	t.Logf("replayed: %v", seen)
}
