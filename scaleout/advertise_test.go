package scaleout

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rig/receipts"
)

// The coordinator sums the slots the live workers of a queue advertise: a
// stale advertisement (a worker killed or cut off) and a withdrawn one
// count no more, a file cut mid-write counts for nothing, and a queue no
// worker advertises still gets one trial.
func TestAdvertisedSlotsAreSummedPerQueueOverLiveWorkers(t *testing.T) {
	spool := t.TempDir()
	now := time.Now()
	for _, a := range []Advert{
		{Worker: "w1", Slots: map[string]int{"q": 2, "other": 1}, At: now},
		{Worker: "w2/with a slash", Slots: map[string]int{"q": 3}, At: now.Add(-advertFresh / 2)},
		{Worker: "gone", Slots: map[string]int{"q": 4}, At: now.Add(-advertFresh - time.Second)},
	} {
		if err := writeAdvert(spool, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(spool, advertsDir, "cut.json"), []byte(`{"worker":"cut","slots":{"q":`), 0o644); err != nil {
		t.Fatal(err)
	}
	sums := slotsPerQueue(readAdverts(spool, now))
	if sums["q"] != 5 || sums["other"] != 1 {
		t.Fatalf("advertised slots %v: want q 5 (w1's 2 and w2's 3; the stale and the cut file not counted) and other 1", sums)
	}
	if err := removeAdvert(spool, "w1"); err != nil {
		t.Fatal(err)
	}
	if sums := slotsPerQueue(readAdverts(spool, now)); sums["q"] != 3 || sums["other"] != 0 {
		t.Fatalf("after w1 withdrew: %v, want q 3 and other 0", sums)
	}
	if err := removeAdvert(spool, "w1"); err != nil {
		t.Fatalf("withdrawing twice: %v", err)
	}
	var c adverts
	if got := c.slots(spool, "nobody"); got != 1 {
		t.Fatalf("a queue no worker advertises: %d, want 1", got)
	}
	var empty adverts
	if got := empty.slots(t.TempDir(), "q"); got != 1 {
		t.Fatalf("a spool with no advertisements at all: %d, want 1", got)
	}
}

// A worker advertises, per queue it serves, 1 before it knows a design;
// the widest slots the frozen design pins for the queue's arms once it
// knows it; the slots of the runtime it runs for that runtime's queue; and
// nothing for a queue it refused.
func TestWorkerAdvertisesItsArmsSlots(t *testing.T) {
	_, f, _ := mergeFixture(t)
	_, sum := stubFrozenBinary(t, &f, 3)
	d, err := f.snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	kind, bin := f.snap.ArmRuntime(d.Arms[0])
	armQueue := Queue(kind, bin, ArmCardClass(d, d.Arms[0]))
	if bin != sum {
		t.Fatalf("the arm's binary is %s, want the stub's %s", bin, sum)
	}
	w := &Worker{opts: WorkerOptions{ID: "w1", Queues: []string{armQueue, "rig.trials.ollama.x.cpu", "refused"}},
		slot: newCardSlot(), gate: newTrialGate(), refused: map[string]string{"refused": "another build"}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	want := func(what string, slots map[string]int) {
		t.Helper()
		got := w.advertised(time.Now()).Slots
		if len(got) != len(slots) {
			t.Fatalf("%s: advertises %v, want %v", what, got, slots)
		}
		for q, n := range slots {
			if got[q] != n {
				t.Fatalf("%s: advertises %v, want %v", what, got, slots)
			}
		}
	}
	want("before any design", map[string]int{armQueue: 1, "rig.trials.ollama.x.cpu": 1})
	w.knowDesign(f.snap)
	want("knowing the design (arm slots 3)", map[string]int{armQueue: 3, "rig.trials.ollama.x.cpu": 1})
	// The runtime it started serves 2 (fewer than the pin): no more than
	// that is advertised for its queue.
	w.takeSlots(TrialInput{Study: "s1", Execution: "exec-2", Key: d.Arms[0].Name + "/qa/capital/1", Queue: armQueue}, 2)
	want("running the arm's runtime at 2 slots", map[string]int{armQueue: 2, "rig.trials.ollama.x.cpu": 1})
}

// chunkSlots: a chunk alone keeps the queue's advertised slots in flight,
// within the in-flight limit; chunks side by side split them as they split
// the limit, rounded up and at least one each.
func TestChunkSlotsSplitsTheAdvertisedSlots(t *testing.T) {
	for _, c := range []struct{ advertised, share, limit, want int }{
		{2, 16, 16, 2},   // alone: the workers' slots
		{40, 16, 16, 16}, // alone: never over --in-flight
		{1, 16, 16, 1},
		{2, 4, 16, 1}, // a quarter of the limit: half a slot, rounded up
		{6, 8, 16, 3},
		{7, 8, 16, 4},
		{20, 8, 16, 8}, // never over its share
		{3, 0, 16, 1},  // no share yet still runs one
	} {
		if got := chunkSlots(c.advertised, c.share, c.limit); got != c.want {
			t.Errorf("chunkSlots(advertised %d, share %d, limit %d) = %d, want %d", c.advertised, c.share, c.limit, got, c.want)
		}
	}
}

// countingCoordinator is a fake coordinator (fakeCoordinator's plan and
// merges) whose count of the queue's advertised slots is scripted: the
// chunk's, then the one each merge reports, by how many merged before.
type countingCoordinator struct {
	*fakeCoordinator
	atChunk int
	merged  func(n int) int // the count the n-th merge (from 1) reports
	mu      sync.Mutex
	n       int
}

func (c *countingCoordinator) Chunk(ctx context.Context, in ChunkInput) ([]PlannedTrial, error) {
	out, err := c.fakeCoordinator.Chunk(ctx, in)
	for i := range out {
		out[i].QueueSlots = c.atChunk
	}
	return out, err
}

func (c *countingCoordinator) Merge(ctx context.Context, tr TrialResult) (MergeResult, error) {
	m, err := c.fakeCoordinator.Merge(ctx, tr)
	c.mu.Lock()
	c.n++
	m.QueueSlots = c.merged(c.n)
	c.mu.Unlock()
	return m, err
}

// heldTrials is a fake trial activity that holds each trial until as many
// of its queue run as the test expects at that point (or a while passed, so
// that a chunk that never sends that many ends and the counts say so), and
// records the most in flight at once.
type heldTrials struct {
	mu      sync.Mutex
	running int
	most    int
	started []int           // running at each start, in start order
	expect  func(n int) int // how many the test expects in flight at the n-th start
	n       int
	total   int // the chunk's trials: the last ones wait for no more than are left
}

func (h *heldTrials) run(ctx context.Context, in TrialInput) (TrialResult, error) {
	h.mu.Lock()
	h.n++
	target := h.expect(h.n)
	h.running++
	h.most = max(h.most, h.running)
	h.started = append(h.started, h.running)
	h.mu.Unlock()
	defer func() { h.mu.Lock(); h.running--; h.mu.Unlock() }()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		h.mu.Lock()
		left := h.total - (h.n - h.running) // not ended yet, this one included
		enough := h.running >= min(target, left)
		h.mu.Unlock()
		if enough {
			break
		}
	}
	return TrialResult{Study: in.Study, Execution: in.Execution, Key: in.Key, Attempt: in.Attempt, Worker: "fake", Outcome: receipts.Scored,
		Started: time.Now().UTC()}, nil
}

// A chunk keeps in flight the slots the queue's workers advertise, not its
// whole --in-flight limit; --in-flight stays the bound over them; and a
// count that grows with a merge (a worker's runtime up with its arm's
// slots) lets more out at once.
func TestTestsuiteChunkKeepsTheAdvertisedSlotsInFlight(t *testing.T) {
	for _, c := range []struct {
		name              string
		atChunk, inFlight int
		merged            func(int) int
		expect            func(int) int
		most              int
		firstAlone        bool
	}{
		{name: "two advertised, limit 16", atChunk: 2, inFlight: 16, merged: func(int) int { return 2 }, expect: func(int) int { return 2 }, most: 2},
		{name: "five advertised, limit 3", atChunk: 5, inFlight: 3, merged: func(int) int { return 5 }, expect: func(int) int { return 3 }, most: 3},
		{name: "none advertised yet, then three", atChunk: 1, inFlight: 16, merged: func(int) int { return 3 },
			expect: func(n int) int { return map[bool]int{true: 1, false: 3}[n == 1] }, most: 3, firstAlone: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := &countingCoordinator{fakeCoordinator: &fakeCoordinator{trials: queueTrials("rig.test.q", 8, 0)}, atChunk: c.atChunk, merged: c.merged}
			h := &heldTrials{expect: c.expect, total: 8}
			env := testsuiteEnv(t, fc, h.run)
			env.ExecuteWorkflow(ChunkWorkflowName, ChunkInput{StudyInput: StudyInput{Study: "s", Execution: "e", Coordinator: "coord", Chunk: 10, InFlight: c.inFlight}})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res StudyResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Counted != 8 {
				t.Fatalf("chunk result %+v, want 8 counted", res)
			}
			if h.most != c.most {
				t.Errorf("at most %d trials of the queue in flight at once (starts saw %v), want %d", h.most, h.started, c.most)
			}
			if c.firstAlone && (len(h.started) < 2 || h.started[1] != 1) {
				t.Errorf("the second trial started beside the first (starts saw %v): with 1 advertised, the first runs alone until its merge brings the new count", h.started)
			}
		})
	}
}

// advertiseFake keeps a fake worker's advertisement fresh in spool until
// the test ends, as a rig worker's Run does: the real coordinator then
// counts the fake Temporal worker's slots as a rig worker's.
func advertiseFake(t *testing.T, spool, worker string, slots map[string]int) {
	t.Helper()
	if err := writeAdvert(spool, Advert{Worker: worker, Slots: slots, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = writeAdvert(spool, Advert{Worker: worker, Slots: slots, At: time.Now()})
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
}
