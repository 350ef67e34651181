package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"rig/receipts"
)

// testsuiteEnv is the SDK's in-memory workflow environment with rig's
// workflows and c's activities registered, and run as the trial activity.
func testsuiteEnv(t *testing.T, c CoordinatorActivities, run func(context.Context, TrialInput) (TrialResult, error)) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(StudyWorkflow, workflow.RegisterOptions{Name: StudyWorkflowName})
	env.RegisterWorkflowWithOptions(ChunkWorkflow, workflow.RegisterOptions{Name: ChunkWorkflowName})
	env.RegisterActivityWithOptions(c.Plan, activity.RegisterOptions{Name: actPlan})
	env.RegisterActivityWithOptions(c.Chunk, activity.RegisterOptions{Name: actChunk})
	env.RegisterActivityWithOptions(c.Merge, activity.RegisterOptions{Name: actMerge})
	env.RegisterActivityWithOptions(c.RecordLost, activity.RegisterOptions{Name: actRecordLost})
	env.RegisterActivityWithOptions(c.QueueServed, activity.RegisterOptions{Name: actQueueServed})
	env.RegisterActivityWithOptions(c.CheckStop, activity.RegisterOptions{Name: actCheckStop})
	env.RegisterActivityWithOptions(run, activity.RegisterOptions{Name: actRunTrial})
	return env
}

func queueTrials(q string, n int, from int) []PlannedTrial {
	var out []PlannedTrial
	for i := range n {
		out = append(out, PlannedTrial{Key: fmt.Sprintf("a/jk/%s-t%d/1", q, from+i), Queue: q, Attempt: 1})
	}
	return out
}

// runStudyOnEngine runs in's StudyWorkflow on the engine cl to its end,
// on in's coordinator queue, and returns its result.
func runStudyOnEngine(t *testing.T, cl client.Client, in StudyInput) StudyResult {
	t.Helper()
	ctx := context.Background()
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(in.Study, in.Execution), TaskQueue: in.Coordinator}, StudyWorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	var res StudyResult
	if err := wr.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// A unit test on the SDK's testsuite: trials of a queue whose worker is
// busy come first in plan order, and with one in flight per queue the
// other queue's trials still run: the slow queue's first trial finishes
// only after every trial of the other queue has. Under v0's rule (one slot
// for the chunk, taken in plan order) the slow trial would hold the only
// slot and wait out its two seconds, and the chunk would fail.
func TestTestsuitePerQueueInFlightDoesNotBlockOtherQueues(t *testing.T) {
	trials := append(queueTrials("rig.test.slow", 2, 0), queueTrials("rig.test.fast", 4, 2)...)
	c := &fakeCoordinator{trials: trials}
	f := &fakeTrials{}
	var mu sync.Mutex
	fastLeft := 4
	fastDone := make(chan struct{})
	run := func(ctx context.Context, in TrialInput) (TrialResult, error) {
		if in.Queue == "rig.test.slow" {
			select {
			case <-fastDone:
			case <-time.After(2 * time.Second):
				return TrialResult{}, errors.New("fake: the slow queue's trial waited for the fast queue's, which never ran")
			}
			return f.run(ctx, in)
		}
		r, err := f.run(ctx, in)
		mu.Lock()
		if fastLeft--; fastLeft == 0 {
			close(fastDone)
		}
		mu.Unlock()
		return r, err
	}
	env := testsuiteEnv(t, c, run)
	env.ExecuteWorkflow(ChunkWorkflowName, ChunkInput{StudyInput: StudyInput{Study: "s", Execution: "e", Coordinator: "coord", Chunk: 10, InFlight: 1}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res StudyResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Counted != 6 || res.Errors != 0 {
		t.Fatalf("chunk result %+v, want 6 counted", res)
	}
	for q, n := range f.most {
		if n != 1 {
			t.Errorf("queue %s had %d trials in flight at once, want 1 (--in-flight 1)", q, n)
		}
	}
}

// On the real dev server: two queues, each limited to two in flight; each
// queue reaches its limit and never passes it, and both run side by side.
func TestPerQueueInFlightOnDevServer(t *testing.T) {
	slow := queueTrials("rig.test.slow", 4, 0)
	script := map[string][]string{}
	for _, tr := range slow {
		script[tr.Key] = []string{"slow"}
	}
	fast := queueTrials("rig.test.fast", 4, 4)
	for _, tr := range fast {
		script[tr.Key] = []string{"slow"}
	}
	c := &fakeCoordinator{trials: append(slow, fast...)}
	f := &fakeTrials{script: script}
	cl, coord := engineOnDevServer(t, c, f, "rig.test.slow", "rig.test.fast")
	in := StudyInput{Study: "pq", Execution: "exec-1", Coordinator: coord, Chunk: 100, InFlight: 2, ChunksAtOnce: 2}
	res := runStudyOnEngine(t, cl, in)
	if res.Counted != 8 {
		t.Fatalf("result %+v, want 8 counted", res)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Logf("most in flight per queue: %v, all queues at once: %d", f.most, f.mostAll)
	for _, q := range []string{"rig.test.slow", "rig.test.fast"} {
		if f.most[q] != 2 {
			t.Errorf("queue %s had at most %d in flight, want exactly its limit 2", q, f.most[q])
		}
	}
	if f.mostAll != 4 {
		t.Errorf("at most %d trials in flight over both queues, want 4 (2 per queue, side by side)", f.mostAll)
	}
}

// On the real dev server: chunks side by side hand on their shares of the
// in-flight limit (reshare-in-flight). Three chunks, two at a time, each on
// its own queue: chunk 1's quick trials end first, and chunk 2 starts then
// with chunk 1's share while chunk 0 still runs (not once chunk 0, the
// oldest, has ended); when chunk 0 ends, no chunk is left to start, and
// chunk 2 takes its share too: its queue reaches the whole limit.
func TestSharesAreHandedOnOnDevServer(t *testing.T) {
	slow := func(ts []PlannedTrial, n int, script map[string][]string) {
		for _, tr := range ts[:n] {
			script[tr.Key] = []string{"slow"}
		}
	}
	script := map[string][]string{}
	c0, c1, c2 := queueTrials("rig.test.c0", 6, 0), queueTrials("rig.test.c1", 6, 0), queueTrials("rig.test.c2", 6, 0)
	slow(c0, 2, script) // two slow, then four quick: ends after one slow round
	slow(c2, 6, script) // all slow: still running when chunk 0 ends
	c := &fakeCoordinator{trials: slices.Concat(c0, c1, c2)}
	f := &fakeTrials{script: script}
	cl, coord := engineOnDevServer(t, c, f, "rig.test.c0", "rig.test.c1", "rig.test.c2")
	in := StudyInput{Study: "rs", Execution: "exec-1", Coordinator: coord, Chunk: 6, InFlight: 4, ChunksAtOnce: 2}
	res := runStudyOnEngine(t, cl, in)
	if res.Counted != 18 {
		t.Fatalf("result %+v, want 18 counted", res)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Logf("most in flight per queue: %v", f.most)
	// Chunk 0's slow pair fills its share; chunk 1's quick trials may
	// end before the next begins, but never exceed theirs.
	if f.most["rig.test.c0"] != 2 || f.most["rig.test.c1"] > 2 {
		t.Errorf("chunks 0 and 1 ran %d and %d at once, want their share 2 each", f.most["rig.test.c0"], f.most["rig.test.c1"])
	}
	if !f.began["rig.test.c2"].Before(f.ended["rig.test.c0"]) {
		t.Errorf("chunk 2 began %s after chunk 0 ended: it waited for the oldest chunk, not for the first to end",
			f.began["rig.test.c2"].Sub(f.ended["rig.test.c0"]))
	}
	if f.most["rig.test.c2"] != in.InFlight {
		t.Errorf("chunk 2, the last one running, had at most %d in flight, want the whole limit %d", f.most["rig.test.c2"], in.InFlight)
	}
}

// On the real dev server: a trial on a queue no worker serves waits its
// start wait, then ends as an error receipt whose detail names the queue
// and the worker that would serve it; the served queue's trials count.
func TestUnservedQueueEndsAsErrorReceiptOnDevServer(t *testing.T) {
	trials := queueTrials("rig.test.qa", 2, 0)
	bin := strings.Repeat("e3", 32)
	nobody := Queue("llama-server", bin, "nvidia-h200")
	trials = append(trials, PlannedTrial{Key: "a/jk/t9/1", Queue: nobody, Attempt: 1, Runtime: "llama-server", BinarySHA256: bin, CardClass: "nvidia-h200"})
	c := &fakeCoordinator{trials: trials}
	f := &fakeTrials{}
	cl, coord := engineOnDevServer(t, c, f, "rig.test.qa")
	in := StudyInput{Study: "us", Execution: "exec-1", Coordinator: coord, Chunk: 100, InFlight: 2, ChunksAtOnce: 2, StartWait: 3 * time.Second}
	began := time.Now()
	res := runStudyOnEngine(t, cl, in)
	took := time.Since(began)
	if res.Counted != 2 || res.Errors != 1 {
		t.Fatalf("result %+v, want 2 counted and 1 error", res)
	}
	if took < in.StartWait {
		t.Errorf("the workflow ended after %s, before the start wait %s", took, in.StartWait)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queueChecks != 1 {
		t.Errorf("the coordinator was asked %d times whether the queue is served, want once", c.queueChecks)
	}
	if len(c.lost) != 1 || !c.lost[0].Final || c.lost[0].Key != "a/jk/t9/1" {
		t.Fatalf("lost attempts %+v, want one final for a/jk/t9/1", c.lost)
	}
	why := c.lost[0].Why
	for _, want := range []string{nobody, "llama-server", bin, "card class nvidia-h200", "within 3s", "rig worker"} {
		if !strings.Contains(why, want) {
			t.Errorf("the error receipt's detail does not name %q: %s", want, why)
		}
	}
	t.Logf("after %s: %s", took.Round(time.Millisecond), why)
}

// The settings are checked before a submit, naming the flag.
func TestRunOptionsCheckNamesTheFlag(t *testing.T) {
	if err := (RunOptions{}).Check(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	for _, o := range []RunOptions{{InFlight: -1}, {InFlight: MaxInFlight + 1}, {StartWait: time.Second}} {
		err := o.Check()
		if err == nil || (!strings.Contains(err.Error(), "--in-flight") && !strings.Contains(err.Error(), "--start-wait")) {
			t.Errorf("%+v: %v, want a refusal naming the flag", o, err)
		}
	}
}

// On the real dev server: a served queue whose one worker is busy keeps
// its trials past the start wait (the coordinator says it is served), and
// every trial counts; none ends as an error receipt.
func TestBusyQueueOutlastsTheStartWaitOnDevServer(t *testing.T) {
	trials := queueTrials("rig.test.busy", 3, 0)
	script := map[string][]string{}
	for _, tr := range trials {
		script[tr.Key] = []string{"slow"}
	}
	c := &fakeCoordinator{trials: trials, busy: map[string]bool{"rig.test.busy": true}}
	f := &fakeTrials{script: script, slots: 1}
	cl, coord := engineOnDevServer(t, c, f, "rig.test.busy")
	in := StudyInput{Study: "busy", Execution: "exec-1", Coordinator: coord, Chunk: 100, InFlight: 3, ChunksAtOnce: 2, StartWait: time.Second}
	res := runStudyOnEngine(t, cl, in)
	c.mu.Lock()
	defer c.mu.Unlock()
	if res.Counted != 3 || res.Errors != 0 || len(c.lost) != 0 {
		t.Fatalf("result %+v, lost %+v: want 3 counted, no error, nothing lost", res, c.lost)
	}
	if c.queueChecks == 0 {
		t.Errorf("no trial waited past the start wait of %s (one worker, three trials of 1.5 s): the test did not test the busy queue", in.StartWait)
	}
	t.Logf("%d start-wait timeouts on the busy queue, each answered served", c.queueChecks)
}

// The coordinator's own answer, on the real dev server: a queue a worker
// polls is served, one nobody polls is not, until a trial from it merges.
func TestCoordinatorQueueServedOnDevServer(t *testing.T) {
	c := &fakeCoordinator{}
	cl, _ := engineOnDevServer(t, c, &fakeTrials{}, "rig.test.polled")
	co := &Coordinator{client: cl, cfg: Config{Address: "dev server"}}
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	var q QueueState
	var err error
	for time.Now().Before(deadline) {
		if q, err = co.QueueServed(ctx, QueueCheck{Queue: "rig.test.polled", Within: time.Minute}); err != nil || q.Served {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || !q.Served {
		t.Fatalf("a queue a worker polls: %+v, %v; want served", q, err)
	}
	q, err = co.QueueServed(ctx, QueueCheck{Queue: "rig.test.nobody", Within: time.Minute})
	if err != nil || q.Served || !strings.Contains(q.Why, "rig.test.nobody") {
		t.Fatalf("a queue nobody polls: %+v, %v; want not served, named", q, err)
	}
	co.served.note("rig.test.nobody")
	if q, err = co.QueueServed(ctx, QueueCheck{Queue: "rig.test.nobody", Within: time.Minute}); err != nil || !q.Served {
		t.Fatalf("a queue whose worker just returned a trial (busy since): %+v, %v; want served", q, err)
	}
}

// The chunks side by side follow the in-flight limit, so that no chunk
// workflow carries much more than InFlightPerChunk trials: four for the
// default limit, twenty for a fleet of 100, and never over MaxChunksAtOnce.
func TestChunksAtOnceFollowsTheLimit(t *testing.T) {
	for _, tc := range []struct{ inFlight, want int }{{1, 2}, {DefaultInFlight, 4}, {20, 4}, {21, 5}, {100, 20}, {160, 32}, {MaxInFlight, MaxChunksAtOnce}} {
		if got := ChunksAtOnce(tc.inFlight); got != tc.want {
			t.Errorf("ChunksAtOnce(%d) = %d, want %d", tc.inFlight, got, tc.want)
		}
	}
}

// On the real dev server: a worker keeps to the arm it has up (arm-affinity).
// Two workers of one queue, two arms whose trials alternate two by two in
// plan order (a a b b a a b b …), two in flight: taken in plan order, each
// worker would switch arms every trial or two, each switch a runtime and
// model load on a real worker; with the freed slot handed to the same arm,
// each worker runs one arm until its trials run out, then the other.
func TestArmAffinityOnDevServer(t *testing.T) {
	var trials []PlannedTrial
	for i := range 16 {
		arm := "a"
		if i/2%2 == 1 {
			arm = "b"
		}
		trials = append(trials, PlannedTrial{Key: fmt.Sprintf("%s/jk/t%d/1", arm, i), Queue: "rig.test.aff", Attempt: 1})
	}
	c := &fakeCoordinator{trials: trials}
	cl, coord := engineOnDevServer(t, c, &fakeTrials{}) // the coordinator; the two workers below
	var mu sync.Mutex
	ran := map[string][]string{} // by worker: the arms of its trials, in order
	for id, hold := range map[string]time.Duration{"w1": 150 * time.Millisecond, "w2": 260 * time.Millisecond} {
		tw := worker.New(cl, "rig.test.aff", worker.Options{Identity: id, DisableWorkflowWorker: true, MaxConcurrentActivityExecutionSize: 1})
		RegisterTrialActivity(tw, func(ctx context.Context, in TrialInput) (TrialResult, error) {
			mu.Lock()
			ran[id] = append(ran[id], armOf(in.Key))
			mu.Unlock()
			time.Sleep(hold)
			return TrialResult{Study: in.Study, Execution: in.Execution, Key: in.Key, Attempt: in.Attempt, Worker: id,
				Outcome: receipts.Scored, Started: time.Now().UTC()}, nil
		})
		if err := tw.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tw.Stop)
	}
	in := StudyInput{Study: "af", Execution: "exec-1", Coordinator: coord, Chunk: 100, InFlight: 2, ChunksAtOnce: 1}
	res := runStudyOnEngine(t, cl, in)
	if res.Counted != len(trials) {
		t.Fatalf("result %+v, want %d counted", res, len(trials))
	}
	mu.Lock()
	defer mu.Unlock()
	switches := 0
	for id, arms := range ran {
		for i := 1; i < len(arms); i++ {
			if arms[i] != arms[i-1] {
				switches++
			}
		}
		t.Logf("worker %s ran %v", id, arms)
	}
	// One switch each when the first arm runs out; a third allows for the
	// two workers going idle at once and taking each other's trial.
	if switches > 3 {
		t.Errorf("the workers switched arms %d times over %d trials of two arms, want at most 3", switches, len(trials))
	}
}
