package scaleout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"rig/analysis"
	"rig/genrecord"
	"rig/receipts"
	"rig/studies"
	"rig/tasks"
)

// blockTrials is a plan of blocks blocks of four trials, two on each of two
// queues, every block's trials in a row as the seeded plan has them.
func blockTrials(blocks int) []PlannedTrial {
	var out []PlannedTrial
	for b := range blocks {
		for j := range 4 {
			q := []string{"rig.test.qa", "rig.test.qb"}[j%2]
			out = append(out, PlannedTrial{Key: fmt.Sprintf("a%d/jk/t%d/1", j%2, b*4+j), Queue: q, Attempt: 1, Block: b})
		}
	}
	return out
}

// Chunks of a stopping design never split a block: each starts at a block
// boundary and holds at least the chunk size, the last whatever is left.
func TestBlockBoundsKeepBlocksWhole(t *testing.T) {
	p := &studies.Plan{}
	for b, n := range []int{3, 3, 3, 5, 1, 2} {
		for range n {
			p.Trials = append(p.Trials, studies.Trial{Block: b})
		}
	}
	got := blockBounds(p, 4)
	want := []int{0, 6, 14} // blocks 0-1 (6), 2-3 (8), 4-5 (3)
	if !slices.Equal(got, want) {
		t.Fatalf("bounds %v, want %v", got, want)
	}
	for _, b := range got[1:] {
		if p.Trials[b].Block == p.Trials[b-1].Block {
			t.Errorf("a chunk starts at %d inside block %d", b, p.Trials[b].Block)
		}
	}
}

// A unit test on the SDK's testsuite: a design with a stopping rule runs
// block by block; the rule settles at the end of the second block, so the
// third and fourth blocks' trials are never scheduled, the coordinator was
// asked after each block that ran (through its last trial), and the result
// says stopped with the not-run count.
// With the rule settling in the second chunk (after the third block), the
// first chunk's blocks all ran and were checked, and the fourth never runs.
func TestTestsuiteStoppingRuleSchedulesNothingAfterTheSettledBlock(t *testing.T) {
	for _, tc := range []struct {
		stopAfter int
		through   []int
	}{{8, []int{3, 7}}, {12, []int{3, 7, 11}}} {
		c := &fakeCoordinator{trials: blockTrials(4), stopAfter: tc.stopAfter}
		f := &fakeTrials{}
		env := testsuiteEnv(t, c, f.run)
		env.ExecuteWorkflow(StudyWorkflowName, StudyInput{Study: "s", Execution: "e", Coordinator: "coord", Chunk: 6, InFlight: 2, ChunksAtOnce: 2})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var res StudyResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		checkStopped(t, c, f, res, tc.stopAfter, tc.through)
	}
}

func checkStopped(t *testing.T, c *fakeCoordinator, f *fakeTrials, res StudyResult, counted int, through []int) {
	t.Helper()
	if !res.Stopped || res.Counted != counted || res.NotRun != 16-counted || res.Trials != 16 {
		t.Fatalf("result %+v, want stopped after %d counted with %d not run of 16", res, counted, 16-counted)
	}
	f.mu.Lock()
	ran := len(f.calls)
	f.mu.Unlock()
	if ran != counted {
		t.Errorf("%d trials were scheduled, want %d (the blocks through the stop)", ran, counted)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var got []int
	for _, s := range c.checks {
		got = append(got, s.Through)
	}
	if !slices.Equal(got, through) {
		t.Errorf("the rule was checked through trials %v, want %v (the end of each block that ran)", got, through)
	}
}

// The same on the real dev server, through the registered workflows and
// activities.
func TestStoppingRuleOnDevServer(t *testing.T) {
	c := &fakeCoordinator{trials: blockTrials(4), stopAfter: 8}
	f := &fakeTrials{}
	cl, coord := engineOnDevServer(t, c, f, "rig.test.qa", "rig.test.qb")
	ctx := context.Background()
	in := StudyInput{Study: "stop", Execution: "exec-1", Coordinator: coord, Chunk: 6, InFlight: 2, ChunksAtOnce: 2}
	res := runStudyOnEngine(t, cl, in)
	checkStopped(t, c, f, res, 8, []int{3, 7})
	// Chunks of at least six trials in whole blocks of four: chunk 0 is
	// blocks 0-1, where the rule settles; chunk 1 (blocks 2-3) never starts.
	if _, err := cl.DescribeWorkflow(ctx, WorkflowID(in.Study, in.Execution)+"/chunk-0", ""); err != nil {
		t.Errorf("chunk 0 did not run: %v", err)
	}
	if _, err := cl.DescribeWorkflow(ctx, WorkflowID(in.Study, in.Execution)+"/chunk-1", ""); err == nil {
		t.Errorf("chunk 1, after the stop, was started")
	}
}

// The follower ends an execution whose workflow stopped as stopped_early,
// with the stored look's audit line; one that ran out stays done, with the
// rule's last look added to its reason, as the local runner writes them.
func TestHandleEndsAStoppedExecutionStoppedEarly(t *testing.T) {
	c, f, _ := mergeFixture(t)
	ctx := context.Background()
	seq := analysis.Sequential{StoppedEarly: true, NotRun: []string{"a|qa|x#1", "a|qa|y#1"},
		Look: analysis.Look{Check: 1, Stop: true, Reason: "every monitored comparison is settled at check 2"}}
	raw, _ := json.Marshal(seq)
	if err := f.st.PutStop(ctx, "exec-2", raw); err != nil {
		t.Fatal(err)
	}
	var endedWhy string
	h := &Handle{c: c, done: make(chan struct{})}
	h.finish(f.st, "s1", "exec-2", StudyResult{Trials: 10, Counted: 8, Stopped: true, NotRun: 2}, nil, func(_ context.Context, _, why string) { endedWhy = why })
	e, err := f.st.Execution(ctx, "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != receipts.StoppedEarly || !strings.Contains(endedWhy, "stopped early at check 2") || !strings.Contains(endedWhy, "2 planned trials not run") {
		t.Fatalf("status %s, why %q: want stopped_early with the look", e.Status, endedWhy)
	}
	if h.Info().Status != string(receipts.StoppedEarly) {
		t.Errorf("the handle says %s", h.Info().Status)
	}
}

// fakeMergeCoordinator is the real coordinator with a fake merge: instead
// of reading a worker's spool entry it stores a graded receipt for the
// trial (the candidate passes every task, the incumbent fails it), so the
// real plan, chunk, stopping look and follower run over a real store
// without a runtime.
type fakeMergeCoordinator struct {
	*Coordinator
	st   *receipts.Store
	hash string
}

func (f fakeMergeCoordinator) Merge(ctx context.Context, tr TrialResult) (MergeResult, error) {
	key, err := studies.ParseTrialKey(tr.Key)
	if err != nil {
		return MergeResult{}, err
	}
	pass := key.Arm == "cand"
	r := receipts.Receipt{StudyID: tr.Study, ExecutionID: tr.Execution, DesignHash: f.hash, Arm: key.Arm, JobKind: key.JobKind, TaskID: key.Task,
		Repeat: key.Repeat, Attempt: tr.Attempt, Outcome: receipts.Scored, ModelName: "m", ModelDigest: modelSHA, Runtime: "llama-server",
		Harness: "llama-server", HarnessVersion: "b1", Pins: map[string]string{"quant": "Q4_1", "worker": tr.Worker}, Machine: "test",
		GenerationSHA256: strings.Repeat("d", 64), Grade: &receipts.Grade{Pass: pass, Score: map[bool]float64{true: 1}[pass], Grader: "json", GraderVersion: "1"}}
	if err := f.st.PutReceipt(ctx, r); err != nil {
		return MergeResult{}, err
	}
	f.stored(r)
	return MergeResult{Outcome: r.Outcome}, nil
}

// On the real dev server, with the real coordinator's plan, chunks and
// stopping look over a real store (only the merge is faked): a design with
// an anytime stopping rule, a candidate that passes every task its
// incumbent fails, a real bank of 48 tasks (96 trials in blocks of 16).
// The rule settles at the first block's end, as the local runner's would
// (E = 2^8/9 ≥ 20): no trial after it is scheduled, the look and the 80
// not-run trials are stored, and the follower ends the execution
// stopped_early with the runner's audit line.
func TestEngineStopsARealStudyEarlyOnDevServer(t *testing.T) {
	ctx := context.Background()
	bankPath, err := filepath.Abs("../tasks/banks/extract-json.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	bank, err := tasks.LoadBank(bankPath)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range bank.Tasks {
		ids = append(ids, task.ID)
	}
	d := &studies.Design{Name: "s1", Repeats: 1,
		Arms:         []studies.Arm{{Name: "inc", Role: studies.RoleIncumbent, Runtime: "llama-server"}, {Name: "cand", Role: studies.RoleCandidate, Runtime: "llama-server"}},
		JobKinds:     []studies.JobKind{{Name: "extract-json", RankingMeasure: studies.Measure{Name: "pass_rate"}, Grader: studies.Grader{Name: "json", Version: 1}}},
		DecisionRule: studies.DecisionRule{Alpha: 0.05}, Stopping: &studies.Stopping{Method: studies.StopAnytime}}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("5", 64)
	frozen := func(arm string) studies.FrozenArm {
		return studies.FrozenArm{Name: arm, ModelSHA256: modelSHA, Binaries: []studies.Binary{{Component: "llama-server", SHA256: binarySHA}}}
	}
	snap := &studies.Snapshot{DesignHash: hash, Design: raw, Arms: []studies.FrozenArm{frozen("inc"), frozen("cand")},
		Banks: []studies.FrozenBank{{JobKind: "extract-json", Bank: studies.Bank{Path: bankPath, SHA256: bank.Hash, Tasks: ids}}}}
	dir := t.TempDir()
	st, err := receipts.Open(filepath.Join(dir, "store.bolt"), "s1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Transition(ctx, receipts.Transition{From: "", To: "approved", Who: "t", Why: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Freeze(ctx, hash, receipts.Transition{From: "approved", To: "frozen", Who: "t", Why: "test"}); err != nil {
		t.Fatal(err)
	}
	e := receipts.Execution{ID: "exec-1", Attempt: 1, Status: receipts.Running, DesignHash: hash, PlanSeed: 7}
	if err := st.PutExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	queue := Queue("llama-server", binarySHA, "cpu")
	f := &fakeTrials{}
	c := &Coordinator{cfg: Config{Spool: t.TempDir()}, studies: fakeStudies{snap: snap, st: st, dir: dir}, queue: "rig.test.coordinator",
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), writers: map[string]*genrecord.Writer{}}
	cl, coord := engineOnDevServer(t, fakeMergeCoordinator{Coordinator: c, st: st, hash: hash}, f, queue)
	c.client, c.cfg.Address = cl, "dev server"
	in := StudyInput{Study: "s1", Execution: "exec-1", DesignHash: hash, Coordinator: coord, Chunk: 20, InFlight: 4, ChunksAtOnce: 2, StartWait: time.Minute}
	if _, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(in.Study, in.Execution), TaskQueue: coord}, StudyWorkflowName, in); err != nil {
		t.Fatal(err)
	}
	var endedWhy string
	h, err := c.Follow("s1", e, func(_ context.Context, _, why string) { endedWhy = why })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the execution did not end within two minutes")
	}
	got, err := st.Execution(ctx, "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	ran := len(f.calls)
	f.mu.Unlock()
	seq, ok := storedStop(ctx, st, "exec-1")
	t.Logf("status %s after %d trials of 96: %s", got.Status, ran, endedWhy)
	if got.Status != receipts.StoppedEarly || !ok || !seq.StoppedEarly {
		t.Fatalf("status %s, stored look %v (stopped %v): want stopped_early", got.Status, ok, seq.StoppedEarly)
	}
	if ran != 16 || len(seq.NotRun) != 80 || seq.Look.Check != 0 {
		t.Errorf("%d trials ran, %d recorded not run, look %d: want 16, 80, the first block's", ran, len(seq.NotRun), seq.Look.Check+1)
	}
	if !strings.Contains(endedWhy, "stopped early at check 1") || !strings.Contains(endedWhy, "80 planned trials not run") || !strings.Contains(endedWhy, "cand vs inc: crossed") {
		t.Errorf("the audit line %q is not the runner's stop line", endedWhy)
	}
	counted, err := st.Counted(ctx, "exec-1")
	if err != nil || len(counted) != 16 {
		t.Errorf("%d counted receipts (%v), want 16", len(counted), err)
	}
}
