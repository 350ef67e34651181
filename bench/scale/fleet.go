package scale

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/runtimes"
	"rig/scaleout"
	"rig/studies"
	"rig/tasks"
)

// FleetOptions is one fleet run: many synthetic workers in this process,
// each a real scaleout.Worker (its checks, its one card slot, its
// heartbeat, the real runner and its spool entry) whose runtime is a timed
// sleep, serving the real coordinator (plan, chunks, merge with its trust
// checks and re-grade, receipts in a real study store).
type FleetOptions struct {
	// Workers is how many synthetic workers serve the queue (default 100).
	Workers int
	// Trials is the plan's size (default 10,000): two arms over
	// Trials/(2·Repeats) tasks, Repeats each.
	Trials, Repeats int
	// Hold is each trial's synthetic generation (default 1 s).
	Hold time.Duration
	// InFlight is the queue's in-flight trials per chunk (default: the
	// worker count, so that every worker can be busy).
	InFlight int
}

func (o FleetOptions) withDefaults() FleetOptions {
	if o.Workers <= 0 {
		o.Workers = 100
	}
	if o.Trials <= 0 {
		o.Trials = 10000
	}
	if o.Repeats <= 0 {
		o.Repeats = 5
	}
	if o.Hold <= 0 {
		o.Hold = time.Second
	}
	if o.InFlight <= 0 {
		o.InFlight = min(o.Workers, scaleout.MaxInFlight)
	}
	return o
}

// FleetResult is what a fleet run measured and what it found in the store.
type FleetResult struct {
	Workers, Planned int
	Hold             time.Duration
	Wall             time.Duration
	Status           string // the execution's status at the end
	// MostInFlight is the most synthetic generations running at once.
	MostInFlight int
	// Overhead is, per merged trial and sorted, the time from the engine
	// scheduling its trial activity to the coordinator finishing its merge,
	// less the synthetic generation's hold: the worker's hand-off, checks,
	// runner and spool entry, and the merge with its re-grade and store
	// write.
	Overhead []time.Duration
	// Phases splits the overhead by phase (Phases), each sorted.
	Phases map[string][]time.Duration
	// Workflows is each workflow's history, by id.
	Workflows map[string]History
	// Counted is the planned trials with exactly one counted receipt;
	// Missing those with none, Doubled those with more than one; Attempts
	// all receipts stored.
	Counted, Missing, Doubled, Attempts int
	// Rows is the generation records' rows; DuplicateRows the row ids seen
	// twice.
	Rows, DuplicateRows int
	// ByWorker is how many merged trials each worker ran.
	ByWorker map[string]int
}

// fleetStudies is the coordinator's view of the one synthetic study: its
// frozen snapshot and its real store.
type fleetStudies struct {
	snap *studies.Snapshot
	st   *receipts.Store
	dir  string
}

func (f fleetStudies) Snapshot(string) (*studies.Snapshot, error) { return f.snap, nil }
func (f fleetStudies) Store(string) (*receipts.Store, error)      { return f.st, nil }
func (f fleetStudies) ExecDir(_, execution string) string         { return filepath.Join(f.dir, execution) }

// AfterTrials has nothing to do: the synthetic study names no reference arm.
func (f fleetStudies) AfterTrials(context.Context, string, receipts.Execution, func(string)) error {
	return nil
}

const (
	fleetStudyName = "fleet"
	fleetExec      = "exec-1"
	fleetKind      = "synthetic"
)

// Fleet runs the fleet on a private Temporal dev server and prints its
// progress and figures to out.
func Fleet(ctx context.Context, o FleetOptions, out io.Writer) (FleetResult, error) {
	srv, dir, stop, err := startDevServer(ctx, "rig-bench-fleet-", out)
	if err != nil {
		return FleetResult{}, err
	}
	defer stop()
	res, err := RunFleet(ctx, srv.Address(), dir, o, out)
	if err != nil {
		return res, err
	}
	for _, l := range res.Lines() {
		fmt.Fprintln(out, l)
	}
	return res, nil
}

// RunFleet runs the fleet on the Temporal cluster at addr, in folder dir
// (its study home, spool, bank, stand-in binary and model).
func RunFleet(ctx context.Context, addr, dir string, o FleetOptions, progress io.Writer) (FleetResult, error) {
	o = o.withDefaults()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fx, err := newFleetStudy(dir, o)
	if err != nil {
		return FleetResult{}, err
	}
	defer fx.st.Close()
	cfg := scaleout.Config{Address: addr, Spool: filepath.Join(dir, "spool")}
	c, err := scaleout.NewCoordinator(ctx, cfg, filepath.Join(dir, "home"), fx.fleetStudies, quiet)
	if err != nil {
		return FleetResult{}, err
	}
	defer c.Close()

	rt := &syntheticRuntimes{hold: o.Hold}
	wctx, stopWorkers := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() {
		stopWorkers()
		running.Wait()
	}()
	for i := range o.Workers {
		w, err := scaleout.NewWorker(ctx, scaleout.WorkerOptions{Config: cfg, ID: fmt.Sprintf("synthetic-%03d", i+1),
			WorkDir: filepath.Join(dir, "work", fmt.Sprint(i+1)), Installed: fx.installed, Gates: unguarded{}, NoSandbox: true,
			Log: quiet, CardClass: "cpu", ModelsDir: fx.models, Launch: rt.launch})
		if err != nil {
			return FleetResult{}, fmt.Errorf("synthetic worker %d: %w", i+1, err)
		}
		running.Add(1)
		go func() {
			defer running.Done()
			w.Run(wctx)
		}()
	}

	res := FleetResult{Workers: o.Workers, Planned: len(fx.plan.Trials), Hold: o.Hold}
	fmt.Fprintf(progress, "fleet: %d synthetic workers, %d planned trials (2 arms × %d tasks × %d repeats), each a %s sleep; in flight per queue %d\n",
		o.Workers, res.Planned, len(fx.taskIDs), o.Repeats, o.Hold, o.InFlight)
	start := time.Now()
	if err := c.Submit(ctx, fleetStudyName, fx.snap, fx.exec, scaleout.RunOptions{InFlight: o.InFlight}); err != nil {
		return res, err
	}
	// Followed as the daemon follows an execution: the progress comes from
	// the merges, and the end is stored on the execution.
	h, err := c.Follow(fleetStudyName, fx.exec, func(context.Context, string, string) {})
	if err != nil {
		return res, err
	}
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-h.Done():
			break wait
		case <-ctx.Done():
			h.Cancel()
			return res, ctx.Err()
		case <-tick.C:
			i := h.Info()
			fmt.Fprintf(progress, "fleet: %d/%d trials merged after %s (%.0f/min), %d generating now\n", i.Done, res.Planned, time.Since(start).Round(time.Second), i.RatePerMin, rt.now())
		}
	}
	res.Wall = time.Since(start)
	res.MostInFlight = rt.most()
	stopWorkers()
	running.Wait()
	if err := fx.check(ctx, &res); err != nil {
		return res, err
	}
	if err := histories(ctx, c.Client(), o.Hold, &res); err != nil {
		return res, err
	}
	return res, nil
}

// Lines are the fleet's figures, one per line.
func (r FleetResult) Lines() []string {
	maxEv, maxID := int64(0), ""
	for id, h := range r.Workflows {
		if h.Events > maxEv {
			maxEv, maxID = h.Events, id
		}
	}
	busy := 0
	for _, n := range r.ByWorker {
		if n > 0 {
			busy++
		}
	}
	lines := []string{
		fmt.Sprintf("fleet: %d planned trials on %d synthetic workers in %s (%.1f trials/s; %d-worker ideal %.1f/s)", r.Planned, r.Workers, r.Wall.Round(time.Second),
			float64(r.Planned)/r.Wall.Seconds(), r.Workers, float64(r.Workers)/r.Hold.Seconds()),
		fmt.Sprintf("fleet: most trials in flight at once %d (the worker count is %d); workers that ran trials %d", r.MostInFlight, r.Workers, busy),
		fmt.Sprintf("fleet: engine overhead per trial, scheduled to merged less the %s hold: p50 %s, p99 %s, max %s over %d trials (goal p50 ≤ 50ms, p99 ≤ 200ms)",
			r.Hold, ms(Percentile(r.Overhead, 0.5)), ms(Percentile(r.Overhead, 0.99)), ms(Percentile(r.Overhead, 1)), len(r.Overhead)),
	}
	for _, p := range Phases {
		ds := r.Phases[p]
		lines = append(lines, fmt.Sprintf("fleet:   %-52s p50 %s, p99 %s", p, ms(Percentile(ds, 0.5)), ms(Percentile(ds, 0.99))))
	}
	return append(lines,
		fmt.Sprintf("fleet: largest workflow history %d events (%s; limit 20,000) over %d workflows", maxEv, maxID, len(r.Workflows)),
		fmt.Sprintf("fleet: execution %s; planned trials with exactly one counted receipt %d/%d (none %d, more than one %d; %d receipts in all); generation rows %d, duplicate row ids %d",
			r.Status, r.Counted, r.Planned, r.Missing, r.Doubled, r.Attempts, r.Rows, r.DuplicateRows))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// fleetStudy is the synthetic study on disk: a bank, a stand-in runtime
// binary and model (never run nor loaded: their digests are what the
// queue, the checks and the receipts name), a frozen snapshot and a store.
type fleetStudy struct {
	fleetStudies
	installed provision.Installed
	models    string
	taskIDs   []string
	exec      receipts.Execution
	plan      *studies.Plan
}

func newFleetStudy(dir string, o FleetOptions) (*fleetStudy, error) {
	fx := &fleetStudy{models: filepath.Join(dir, "models")}
	for _, d := range []string{"cache", "models", "bank", "records"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	binSum, modelSHA, modelPath, err := fx.writeStandIns(dir)
	if err != nil {
		return nil, err
	}
	bankPath, b, err := fx.writeBank(dir, o)
	if err != nil {
		return nil, err
	}
	d := fleetDesign(o)
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	hash, err := studies.Hash(d)
	if err != nil {
		return nil, err
	}
	frozen := func(arm string) studies.FrozenArm {
		return studies.FrozenArm{Name: arm, ModelSHA256: modelSHA, ModelPath: modelPath, Binaries: []studies.Binary{{Component: "llama-server", SHA256: binSum}}}
	}
	fx.snap = &studies.Snapshot{DesignHash: hash, Design: raw, Arms: []studies.FrozenArm{frozen("a"), frozen("b")},
		Banks: []studies.FrozenBank{{JobKind: fleetKind, Bank: studies.Bank{Path: bankPath, SHA256: b.Hash, Tasks: fx.taskIDs}}}}
	fx.dir = filepath.Join(dir, "records")
	if err := fx.openStore(dir, d, hash); err != nil {
		return nil, err
	}
	return fx, nil
}

// writeStandIns writes the stand-in runtime binary and model file and
// returns their digests and the model's path.
func (fx *fleetStudy) writeStandIns(dir string) (binSum, modelSHA, modelPath string, err error) {
	bin := filepath.Join(dir, "cache", "llama-server")
	if err := os.WriteFile(bin, []byte("#!/bin/false\n# rig bench scale --fleet: the synthetic runtime's stand-in binary, never run\n"), 0o755); err != nil {
		return "", "", "", err
	}
	binSum, err = runtimes.FileSHA256(bin)
	if err != nil {
		return "", "", "", err
	}
	fx.installed = provision.Installed{LlamaServer: bin, LlamaBuildFlag: "synthetic", Cache: filepath.Join(dir, "cache")}
	model := []byte("GGUF rig bench scale --fleet: a stand-in model, never loaded\n")
	modelSum := sha256.Sum256(model)
	modelSHA = hex.EncodeToString(modelSum[:])
	modelPath = filepath.Join(fx.models, modelSHA)
	if err := os.WriteFile(modelPath, model, 0o644); err != nil {
		return "", "", "", err
	}
	return binSum, modelSHA, modelPath, nil
}

// writeBank writes and loads the synthetic bank: enough one-word tasks for
// o.Trials trials over two arms and o.Repeats repeats.
func (fx *fleetStudy) writeBank(dir string, o FleetOptions) (string, *tasks.Bank, error) {
	tasksPerArm := max(1, o.Trials/(2*o.Repeats))
	var bank strings.Builder
	bank.WriteString(`{"schema_version":1,"job_kind":"synthetic","bank_version":"1","description":"rig bench scale --fleet: one-word answers"}` + "\n")
	for i := range tasksPerArm {
		id := fmt.Sprintf("t%05d", i+1)
		fx.taskIDs = append(fx.taskIDs, id)
		fmt.Fprintf(&bank, `{"id":%q,"job_kind":"synthetic","template_id":"t","difficulty":"easy","input":{"prompt":"Answer with one word: ok."},"key":{"answer":"ok"},"grader":{"name":"exact","version":1},"holdout":false,"source":"private"}`+"\n", id)
	}
	bankPath := filepath.Join(dir, "bank", "synthetic.jsonl")
	if err := os.WriteFile(bankPath, []byte(bank.String()), 0o644); err != nil {
		return "", nil, err
	}
	b, err := tasks.LoadBank(bankPath)
	if err != nil {
		return "", nil, err
	}
	return bankPath, b, nil
}

// fleetDesign is the synthetic study's design: two arms on the same
// stand-in model, graded by exact match.
func fleetDesign(o FleetOptions) *studies.Design {
	pins := studies.Pins{Quant: "Q4_1", Context: 512, StopCap: 8, RuntimeBuild: "synthetic",
		Sampling: studies.Sampling{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1}}
	return &studies.Design{Name: fleetStudyName, Repeats: o.Repeats,
		Arms: []studies.Arm{
			{Name: "a", Role: studies.RoleIncumbent, Runtime: "llama-server", Model: studies.Model{RegistryName: "synthetic"}, Pins: pins},
			{Name: "b", Role: studies.RoleCandidate, Runtime: "llama-server", Model: studies.Model{RegistryName: "synthetic"}, Pins: pins}},
		JobKinds:     []studies.JobKind{{Name: fleetKind, RankingMeasure: studies.Measure{Name: "pass_rate"}, Grader: studies.Grader{Name: "exact", Version: 1}}},
		DecisionRule: studies.DecisionRule{Alpha: 0.05}}
}

// openStore opens the study's store in dir, takes it to frozen with one
// running execution, and plans that execution.
func (fx *fleetStudy) openStore(dir string, d *studies.Design, hash string) error {
	st, err := receipts.Open(filepath.Join(dir, "store.bolt"), fleetStudyName)
	if err != nil {
		return err
	}
	fx.st = st
	ctx := context.Background()
	fx.exec = receipts.Execution{ID: fleetExec, Attempt: 1, Status: receipts.Running, DesignHash: hash, PlanSeed: 1}
	for _, step := range []func() error{
		func() error {
			return st.Transition(ctx, receipts.Transition{From: "", To: "approved", Who: "rig bench scale", Why: "synthetic fleet"})
		},
		func() error {
			return st.Freeze(ctx, hash, receipts.Transition{From: "approved", To: "frozen", Who: "rig bench scale", Why: "synthetic fleet"})
		},
		func() error { return st.PutExecution(ctx, fx.exec) },
	} {
		if err := step(); err != nil {
			st.Close()
			return err
		}
	}
	if fx.plan, err = run.PlanOf(d, fx.snap, fx.exec); err != nil {
		st.Close()
		return err
	}
	return nil
}

// check reads the store and the records after the run: one counted
// receipt per planned trial, and no generation row twice.
func (fx *fleetStudy) check(ctx context.Context, res *FleetResult) error {
	e, err := fx.st.Execution(ctx, fleetExec)
	if err != nil {
		return err
	}
	res.Status = string(e.Status)
	all, err := fx.st.Receipts(ctx, fleetExec)
	if err != nil {
		return err
	}
	res.Attempts = len(all)
	counted := map[receipts.TrialKey]int{}
	res.ByWorker = map[string]int{}
	for _, r := range all {
		if r.Outcome.Counted() {
			counted[r.Trial()]++
			res.ByWorker[r.Pins["worker"]]++
		}
	}
	for _, t := range fx.plan.Trials {
		switch counted[receipts.TrialKey{Arm: t.Key.Arm, TaskID: t.Key.Task, Repeat: t.Key.Repeat}] {
		case 0:
			res.Missing++
		case 1:
			res.Counted++
		default:
			res.Doubled++
		}
	}
	seen := map[string]bool{}
	files, err := filepath.Glob(layout.Records(fx.ExecDir(fleetStudyName, fleetExec)).Generations())
	if err != nil {
		return err
	}
	for _, f := range files {
		rd, err := genrecord.OpenReader(f)
		if err != nil {
			return err
		}
		for {
			row, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rd.Close()
				return err
			}
			res.Rows++
			if seen[row.RowID] {
				res.DuplicateRows++
			}
			seen[row.RowID] = true
		}
		rd.Close()
	}
	return nil
}

// histories reads every workflow of the fleet's execution from the
// engine: its size, and each trial's times from its trial activity's
// scheduling to its merge's completion, phase by phase.
func histories(ctx context.Context, cl client.Client, hold time.Duration, res *FleetResult) error {
	parent := scaleout.WorkflowID(fleetStudyName, fleetExec)
	res.Workflows = map[string]History{}
	ids := []string{parent}
	dc := converter.GetDefaultDataConverter()
	// an activity's three times, by its scheduling event
	type activity struct {
		kind, key                 string
		scheduled, started, ended time.Time
	}
	trials := map[string]activity{} // by trial key#attempt, the completed trial activity
	merges := map[string]activity{} // and its completed merge
	for len(ids) > 0 {
		id := ids[0]
		ids = ids[1:]
		acts := map[int64]*activity{}
		var h History
		it := cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return fmt.Errorf("reading the history of %s: %w", id, err)
			}
			h.Events++
			at := ev.GetEventTime().AsTime()
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
				ids = append(ids, ev.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowId())
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				a := ev.GetActivityTaskScheduledEventAttributes()
				key, err := activityKey(dc, a.GetActivityType().GetName(), a.GetInput())
				if err != nil {
					return fmt.Errorf("%s: %w", id, err)
				}
				if key != "" {
					acts[ev.GetEventId()] = &activity{kind: a.GetActivityType().GetName(), key: key, scheduled: at}
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				// Written when the activity ends, with the time it started.
				if a, ok := acts[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; ok {
					a.started = at
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				a, ok := acts[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]
				if !ok {
					break
				}
				a.ended = at
				if a.kind == scaleout.ActivityRunTrial {
					trials[a.key] = *a
				} else {
					merges[a.key] = *a
				}
			}
		}
		res.Workflows[id] = h
	}
	res.Phases = map[string][]time.Duration{}
	for key, m := range merges {
		t, ok := trials[key]
		if !ok {
			continue
		}
		res.Overhead = append(res.Overhead, m.ended.Sub(t.scheduled)-hold)
		for phase, d := range map[string]time.Duration{
			PhaseTaken:      t.started.Sub(t.scheduled),
			PhaseWorker:     t.ended.Sub(t.started) - hold,
			PhaseHandOff:    m.scheduled.Sub(t.ended),
			PhaseMergeTaken: m.started.Sub(m.scheduled),
			PhaseMerge:      m.ended.Sub(m.started),
		} {
			res.Phases[phase] = append(res.Phases[phase], d)
		}
	}
	slices.Sort(res.Overhead)
	for _, ds := range res.Phases {
		slices.Sort(ds)
	}
	return nil
}

// The phases of a trial's overhead, in order.
const (
	PhaseTaken      = "trial taken by a worker"
	PhaseWorker     = "worker (checks, runner, spool entry) less the hold"
	PhaseHandOff    = "trial done to merge scheduled"
	PhaseMergeTaken = "merge taken by the coordinator"
	PhaseMerge      = "merge (checks, re-grade, rows, receipt)"
)

// Phases lists the phases in order.
var Phases = []string{PhaseTaken, PhaseWorker, PhaseHandOff, PhaseMergeTaken, PhaseMerge}

// activityKey is the trial key and attempt a trial or merge activity's
// input names ("" for other activities).
func activityKey(dc converter.DataConverter, kind string, in *commonpb.Payloads) (string, error) {
	switch kind {
	case scaleout.ActivityRunTrial:
		var t scaleout.TrialInput
		if err := dc.FromPayloads(in, &t); err != nil {
			return "", fmt.Errorf("a trial activity's input: %w", err)
		}
		return fmt.Sprintf("%s#%d", t.Key, t.Attempt), nil
	case scaleout.ActivityMerge:
		var t scaleout.TrialResult
		if err := dc.FromPayloads(in, &t); err != nil {
			return "", fmt.Errorf("a merge activity's input: %w", err)
		}
		return fmt.Sprintf("%s#%d", t.Key, t.Attempt), nil
	}
	return "", nil
}

// unguarded is the fleet's governor: its runtime touches no card, so there
// is nothing to guard and nothing to preempt.
type unguarded struct{}

func (unguarded) Ready(context.Context) error { return nil }
func (unguarded) Watch(context.Context, string, *runtimes.Sandbox, uint64) (run.TrialGuard, error) {
	return noGuard{}, nil
}

type noGuard struct{}

func (noGuard) Preempted() <-chan struct{} { return nil }
func (noGuard) End() string                { return "" }

// syntheticRuntimes starts the fleet's runtimes: each generation is a
// sleep of hold, and the answer alternates by task between the key's word
// and another, so that both grades pass through the merge's re-grade.
type syntheticRuntimes struct {
	hold time.Duration

	mu            sync.Mutex
	running, peak int

	machineOnce sync.Once
	m           runtimes.Machine
}

func (s *syntheticRuntimes) launch(_ context.Context, b runtimes.Build, cfg runtimes.Config) (runtimes.Runtime, error) {
	return &syntheticRuntime{s: s, pins: runtimes.Pins{
		Stack: runtimes.Stack{Runtime: b.Runtime, RuntimeVersion: "synthetic (rig bench scale --fleet)", BinarySHA256: b.BinarySHA256, BuildFlags: b.BuildFlags,
			Libraries: map[string]string{}},
		ModelName: cfg.ModelName, ModelFile: cfg.Model, ModelSHA256: cfg.ModelSHA256, Context: cfg.Context, NoSandbox: true, Machine: s.machine()}}, nil
}

// machine is this machine's line, read once for every runtime.
func (s *syntheticRuntimes) machine() runtimes.Machine {
	s.machineOnce.Do(func() { s.m = runtimes.ReadMachine() })
	return s.m
}

func (s *syntheticRuntimes) now() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func (s *syntheticRuntimes) most() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

type syntheticRuntime struct {
	s    *syntheticRuntimes
	pins runtimes.Pins
}

func (r *syntheticRuntime) Name() string               { return r.pins.Runtime }
func (r *syntheticRuntime) Pins() runtimes.Pins        { return r.pins }
func (r *syntheticRuntime) Endpoint() string           { return "" }
func (r *syntheticRuntime) Sandbox() *runtimes.Sandbox { return nil }
func (r *syntheticRuntime) Stop(context.Context) error { return nil }
func (r *syntheticRuntime) Generate(ctx context.Context, req runtimes.Request) (runtimes.Result, error) {
	r.s.mu.Lock()
	r.s.running++
	r.s.peak = max(r.s.peak, r.s.running)
	r.s.mu.Unlock()
	defer func() {
		r.s.mu.Lock()
		r.s.running--
		r.s.mu.Unlock()
	}()
	start := time.Now()
	select {
	case <-time.After(r.s.hold):
	case <-ctx.Done():
		return runtimes.Result{}, ctx.Err()
	}
	text := "ok"
	if crc32.ChecksumIEEE([]byte(req.CallID))%3 == 0 {
		text = "no"
	}
	wall := time.Since(start)
	// One token and its top-K as the request asks (the token first, then
	// unlikely others): the record's row is whole.
	tok := runtimes.Candidate{ID: 1, Text: text, Logprob: -0.01}
	top := []runtimes.Candidate{tok}
	for i := 1; i < req.TopK; i++ {
		top = append(top, runtimes.Candidate{ID: 1 + i, Text: fmt.Sprintf("alt%d", i), Logprob: -5 - float64(i)})
	}
	return runtimes.Result{CallID: req.CallID, Text: text, PromptTokens: 8, OutputTokens: 1, StopReason: "stop", Wall: wall,
		Steps: []runtimes.Step{{Candidate: tok, Top: top}}, Timings: runtimes.Timings{PromptTokens: 8, PromptDuration: wall / 2, OutputTokens: 1, OutputDuration: wall / 2}}, nil
}
