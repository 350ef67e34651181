package scaleout

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"rig/receipts"
	"rig/studies"
)

// A lost attempt's receipt names the worker it ran on and when it started
// (its started_at is not its finished_at), and the entry its killed worker
// left half-written in the spool is removed; another attempt's is not.
func TestLostAttemptReceiptSaysWhereAndSince(t *testing.T) {
	c, f, spool := mergeFixture(t)
	ctx := context.Background()
	key := studies.TrialKey{Arm: "a", JobKind: "qa", Task: "capital", Repeat: 1}.String()
	x, err := execSpool(spool, "s1", "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	thisAttempt := filepath.Join(x.Trials(), entryName(key, 1, "gpu07")+partial)
	otherAttempt := filepath.Join(x.Trials(), entryName(key, 2, "gpu07")+partial)
	for _, dir := range []string{thisAttempt, otherAttempt} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "generations.jsonl"), []byte("{\"half\":"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	started := time.Now().Add(-90 * time.Second).UTC()
	m, err := c.RecordLost(ctx, LostAttempt{Study: "s1", Execution: "exec-2", Key: key, Attempt: 1, Why: "heartbeat timeout",
		Worker: "gpu07", Started: started})
	if err != nil || m.Outcome != receipts.Preempted {
		t.Fatalf("RecordLost: %+v, %v; want a preempted receipt", m, err)
	}
	rec, err := f.st.Receipt(ctx, "exec-2", capitalKey, 1)
	if err != nil {
		t.Fatal(err)
	}
	if w := rec.Pins["worker"]; w != "gpu07" {
		t.Errorf("the lost attempt's worker pin is %q, want gpu07", w)
	}
	if !rec.StartedAt.Equal(started) || !rec.FinishedAt.After(rec.StartedAt) {
		t.Errorf("the lost attempt started %v and finished %v; want it started %v, before it finished", rec.StartedAt, rec.FinishedAt, started)
	}
	if _, err := os.Stat(thisAttempt); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lost attempt's .partial entry is still in the spool (%v)", err)
	}
	if _, err := os.Stat(otherAttempt); err != nil {
		t.Errorf("another attempt's .partial entry was removed: %v", err)
	}

	// Nothing known of the worker (killed before its first heartbeat): no
	// worker pin, and the receipt is still valid.
	m, err = c.RecordLost(ctx, LostAttempt{Study: "s1", Execution: "exec-2", Key: key, Attempt: 2, Parent: 1, Why: "heartbeat timeout"})
	if err != nil || m.Outcome != receipts.Preempted {
		t.Fatalf("RecordLost of attempt 2: %+v, %v", m, err)
	}
	rec, err = f.st.Receipt(ctx, "exec-2", capitalKey, 2)
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := rec.Pins["worker"]; ok {
		t.Errorf("a lost attempt whose worker is unknown pins worker %q", w)
	}
	if _, err := os.Stat(otherAttempt); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("attempt 2's .partial entry is still in the spool once it is recorded lost (%v)", err)
	}
}

// lostSeen reads the worker and its start from the attempt's last
// heartbeat; without one (or a beat from an older rig, the key alone) the
// start is when the attempt was scheduled.
func TestLostSeen(t *testing.T) {
	scheduled := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	beat := attemptBeat{Key: "a/qa/capital/1", Worker: "gpu07", Started: scheduled.Add(3 * time.Second)}
	for _, c := range []struct {
		name string
		err  error
		want attemptBeat
	}{
		{"heartbeat timeout", temporal.NewHeartbeatTimeoutError(beat), beat},
		{"an older worker's beat", temporal.NewHeartbeatTimeoutError("a/qa/capital/1"), attemptBeat{Started: scheduled}},
		{"no heartbeat", temporal.NewHeartbeatTimeoutError(), attemptBeat{Started: scheduled}},
		{"another error", errors.New("the runtime died"), attemptBeat{Started: scheduled}},
	} {
		if got := lostSeen(c.err, scheduled); got.Worker != c.want.Worker || !got.Started.Equal(c.want.Started) {
			t.Errorf("%s: lostSeen = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Through the workflow (the SDK's testsuite): an attempt whose worker
// stopped heartbeating is recorded lost with the worker and start of its
// last beat, and one whose spool entry could not be brought in with those
// its worker returned.
func TestTestsuiteLostAttemptCarriesItsWorkerAndStart(t *testing.T) {
	beatStarted := time.Date(2026, 12, 6, 9, 0, 3, 0, time.UTC)
	const hbKey, mergeKey = "a/jk/hb/1", "a/jk/merge/1"
	returned := time.Date(2026, 12, 6, 9, 0, 5, 0, time.UTC)
	run := func(_ context.Context, in TrialInput) (TrialResult, error) {
		if in.Key == hbKey && in.Attempt == 1 {
			return TrialResult{}, temporal.NewHeartbeatTimeoutError(attemptBeat{Key: in.Key, Worker: "gpu07", Started: beatStarted})
		}
		return TrialResult{Study: in.Study, Execution: in.Execution, Key: in.Key, Attempt: in.Attempt, Worker: "gpu08",
			Outcome: receipts.Scored, Started: returned}, nil
	}
	c := &fakeCoordinator{trials: []PlannedTrial{{Key: hbKey, Queue: "q", Attempt: 1}, {Key: mergeKey, Queue: "q", Attempt: 1}},
		mergeFails: map[string]bool{mergeKey: true}}
	env := testsuiteEnv(t, c, run)
	env.ExecuteWorkflow(ChunkWorkflowName, ChunkInput{StudyInput: StudyInput{Study: "s", Execution: "e", Coordinator: "coord", Chunk: 10, InFlight: 1}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var hb, merge *LostAttempt
	for i, l := range c.lost {
		switch {
		case l.Key == hbKey && hb == nil:
			hb = &c.lost[i]
		case l.Key == mergeKey && merge == nil:
			merge = &c.lost[i]
		}
	}
	if hb == nil || hb.Worker != "gpu07" || !hb.Started.Equal(beatStarted) {
		t.Errorf("the attempt that stopped heartbeating was recorded lost as %+v; want worker gpu07, started %v", hb, beatStarted)
	}
	if merge == nil || merge.Worker != "gpu08" || !merge.Started.Equal(returned) {
		t.Errorf("the attempt whose entry could not be brought in was recorded lost as %+v; want worker gpu08, started %v", merge, returned)
	}
}

// On the real dev server, with the worker's own heartbeat: an attempt whose
// worker stops beating (killed: here its beats stop and it never returns)
// is timed out by the engine, and the workflow records it lost with the
// worker and start the last beat carried through the engine.
func TestLostAttemptCarriesItsLastBeatOnDevServer(t *testing.T) {
	const queue = "rig.test.lost"
	c := &fakeCoordinator{trials: queueTrials(queue, 1, 0)}
	started := time.Now().UTC().Truncate(time.Millisecond)
	s := startDevServer(t)
	cl, err := Config{Address: s.Address(), Spool: t.TempDir()}.Dial(context.Background(), "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cw := worker.New(cl, "rig.test.coordinator", worker.Options{})
	RegisterCoordinator(cw, c)
	tw := worker.New(cl, queue, worker.Options{DisableWorkflowWorker: true})
	RegisterTrialActivity(tw, func(ctx context.Context, in TrialInput) (TrialResult, error) {
		if in.Attempt > 1 {
			return TrialResult{Study: in.Study, Execution: in.Execution, Key: in.Key, Attempt: in.Attempt, Worker: "gpu08", Outcome: receipts.Scored}, nil
		}
		stop := heartbeat(ctx, attemptBeat{Key: in.Key, Worker: "gpu07", Started: started})
		time.Sleep(3 * time.Second) // one beat goes out
		stop()                      // the worker dies
		<-ctx.Done()
		return TrialResult{}, ctx.Err()
	})
	for _, w := range []worker.Worker{cw, tw} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	res := runStudyOnEngine(t, cl, StudyInput{Study: "lost", Execution: "exec-1", Coordinator: "rig.test.coordinator", Chunk: 10, InFlight: 1})
	if res.Counted != 1 {
		t.Fatalf("result %+v, want the trial counted on its second attempt", res)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lost) != 1 || c.lost[0].Worker != "gpu07" || !c.lost[0].Started.Equal(started) {
		t.Fatalf("lost attempts %+v; want one, on gpu07, started %v", c.lost, started)
	}
}

// A trial that finished while the engine was down: its worker's whole entry
// is in the spool, unreported, when the engine records the attempt lost.
// The coordinator waits for the worker's report (here its merge arrives
// 1.5 s into the wait, as the report workflow would bring it) and answers
// with the merged receipt: no preempted receipt, no next attempt. An entry
// of another worker than the attempt's is not waited for.
func TestLostAttemptWaitsForItsWorkersReport(t *testing.T) {
	c, f, spool := mergeFixture(t)
	c.reportWait = time.Minute
	ctx := context.Background()
	tr := writeEntry(t, spool, "w1", "Paris", nil)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		if _, err := c.Merge(ctx, tr); err != nil {
			t.Errorf("the report's merge: %v", err)
		}
	}()
	began := time.Now()
	m, err := c.RecordLost(ctx, LostAttempt{Study: "s1", Execution: "exec-2", Key: tr.Key, Attempt: 1, Why: "heartbeat timeout", Worker: "w1"})
	if err != nil || m.Outcome != receipts.Scored {
		t.Fatalf("RecordLost: %+v, %v; want the reported entry's scored receipt", m, err)
	}
	if took := time.Since(began); took < time.Second || took > 30*time.Second {
		t.Errorf("RecordLost returned after %s; want once the report was merged, 1.5 s in", took)
	}
	rs, err := f.st.Receipts(ctx, "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Outcome != receipts.Scored || rs[0].Pins["worker"] != "w1" {
		t.Errorf("receipts %+v; want the one merged from w1", rs)
	}

	// Another worker's whole entry, the attempt's worker being w2: not
	// waited for, recorded lost at once.
	other := writeEntryOf(t, spool, studies.TrialKey{Arm: "a", JobKind: "qa", Task: "sum", Repeat: 1}, 1, "w9", "4", nil)
	began = time.Now()
	m, err = c.RecordLost(ctx, LostAttempt{Study: "s1", Execution: "exec-2", Key: other.Key, Attempt: 1, Why: "heartbeat timeout", Worker: "w2"})
	if err != nil || m.Outcome != receipts.Preempted {
		t.Fatalf("RecordLost with another worker's entry: %+v, %v; want preempted", m, err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("RecordLost waited %s for an entry not of the attempt's worker", took)
	}
}
