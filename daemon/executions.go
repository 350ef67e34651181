package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"rig/api"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/scaleout"
	"rig/studies"
)

// RunRequest is `rig study run`, as the protocol names it.
type RunRequest = api.RunRequest

// execHandle follows a running execution: run.Handle for one on this card,
// scaleout.Handle for one spread over workers.
type execHandle interface {
	Info() run.ExecInfo
	Cancel()
	Done() <-chan struct{}
}

// Run starts an execution of a frozen study in the background and returns at
// once; Status (or the CLI's progress) follows it. The same idempotency key
// with the same request returns the existing execution.
func (ex Executions) Run(ctx context.Context, req RunRequest) (run.ExecInfo, error) {
	snap, err := ex.s.Snapshot(req.Study)
	if err != nil {
		return run.ExecInfo{}, err
	}
	st, err := ex.s.store(req.Study)
	if err != nil {
		return run.ExecInfo{}, err
	}
	body, _ := json.Marshal(studies.RunBody{Study: req.Study, SnapshotHash: snap.Hash, Parent: req.Parent})
	if req.Key != "" {
		if id, found, err := st.LookupIdempotency(ctx, req.Key, body); err != nil {
			return run.ExecInfo{}, err
		} else if found {
			return ex.execInfo(ctx, req.Study, id)
		}
	}
	if name, info, ok := ex.s.runningExecution(); ok {
		if name == req.Study && req.Parent == "" {
			// The study is already running (perhaps resumed after a
			// restart): asking again follows that execution.
			return info, nil
		}
		return run.ExecInfo{}, fmt.Errorf("study %s is running execution %s; one execution at a time owns the card (rig study cancel %s)", name, info.ID, name)
	}
	if err := ex.checkEngine(req, snap); err != nil {
		return run.ExecInfo{}, err
	}
	if err := ex.checkGates(ctx, req.Study, snap); err != nil {
		return run.ExecInfo{}, err
	}
	// Every pinned asset is hashed again: a model, runtime, bank or licence
	// registry changed since the freeze is a stale asset, never run.
	a, err := ex.s.assets()
	if err != nil {
		return run.ExecInfo{}, err
	}
	if err := studies.CheckStale(ctx, snap, a); err != nil {
		return run.ExecInfo{}, err
	}
	if err := ex.s.Budget().check(ctx, req.Study); err != nil {
		return run.ExecInfo{}, err
	}
	e, err := nextExecution(ctx, st, snap, req.Parent)
	if err != nil {
		return run.ExecInfo{}, err
	}
	if req.Key != "" {
		if existing, replay, err := st.ClaimIdempotency(ctx, req.Key, body, e.ID); err != nil {
			return run.ExecInfo{}, err
		} else if replay {
			return ex.execInfo(ctx, req.Study, existing)
		}
	}
	if err := st.PutExecution(ctx, e); err != nil {
		return run.ExecInfo{}, err
	}
	actor, err := ex.s.actor(ctx, req.Actor)
	if err != nil {
		return run.ExecInfo{}, err
	}
	if req.Engine == "temporal" {
		if err := ex.markEngine(req, e.ID); err != nil {
			return run.ExecInfo{}, err
		}
	}
	if _, err := ex.s.apply(ctx, req.Study, studies.Event{Kind: studies.EventRun, Actor: actor, At: time.Now().UTC(), Execution: e.ID, Why: "run " + e.ID}); err != nil {
		return run.ExecInfo{}, err
	}
	return ex.start(req.Study, snap, e)
}

// checkEngine refuses an unknown engine, options the engine does not take,
// and for temporal a daemon without a cluster or a design it cannot spread.
func (ex Executions) checkEngine(req RunRequest, snap *studies.Snapshot) error {
	switch req.Engine {
	case "", "local":
		if req.InFlight != 0 || req.StartWait != 0 {
			return fmt.Errorf("--in-flight and --start-wait set the temporal engine's task queues; a run on this card has none (add --engine temporal, or leave them out)")
		}
	case "temporal":
		if ex.s.Engine == nil {
			return fmt.Errorf("--engine temporal: this daemon has no Temporal cluster configured (start it with rig daemon --temporal HOST:PORT --spool DIR; see docs/scale-out.md)")
		}
		d, err := snap.DesignValue()
		if err != nil {
			return err
		}
		if err := scaleout.CheckDesign(d); err != nil {
			return err
		}
		if err := runOptions(req).Check(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--engine %q: the engines are local (this card) and temporal (rig workers through Temporal)", req.Engine)
	}
	return nil
}

// nextExecution is the study's next execution, not yet stored: numbered
// after those in st, one attempt after its parent's when it has one.
func nextExecution(ctx context.Context, st *receipts.Store, snap *studies.Snapshot, parentID string) (receipts.Execution, error) {
	execs, err := st.Executions(ctx)
	if err != nil {
		return receipts.Execution{}, err
	}
	e := receipts.Execution{ID: fmt.Sprintf("exec-%d", len(execs)+1), Attempt: 1, Status: receipts.Running, DesignHash: snap.DesignHash, CreatedAt: time.Now().UTC()}
	if parentID != "" {
		if err := layout.CheckExecutionID(parentID); err != nil {
			return receipts.Execution{}, err
		}
		parent, err := st.Execution(ctx, parentID)
		if err != nil {
			return receipts.Execution{}, err
		}
		e.Parent, e.Attempt = parent.ID, parent.Attempt+1
	}
	e.PlanSeed = uint64(studies.PlanSeed(snap.Hash, e.Attempt))
	return e, nil
}

// markEngine writes the execution's engine marker for a run through
// Temporal.
func (ex Executions) markEngine(req RunRequest, execID string) error {
	x, err := ex.s.execution(req.Study, execID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(x.Dir(), 0o700); err != nil {
		return err
	}
	// The marker makes a daemon restarted mid-run follow the workflow
	// again instead of running the trials here.
	return atomicfile.WriteJSON(x.EngineMarker(), engineMarker{Engine: "temporal", Workflow: scaleout.WorkflowID(req.Study, execID), InFlight: req.InFlight, StartWait: req.StartWait}, 0o600)
}

// Resume restarts every execution that was running when the daemon stopped.
// Receipts already stored are kept; the plan is rebuilt from its seed, so the
// execution continues where it stopped, and no trial is scored twice.
func (ex Executions) Resume(ctx context.Context) ([]run.ExecInfo, error) {
	names, err := ex.s.Studies().List()
	if err != nil {
		return nil, err
	}
	var out []run.ExecInfo
	for _, name := range names {
		l, err := ex.s.lifecycle(name)
		if err != nil || l.State != studies.Running || l.Running == "" {
			continue
		}
		snap, err := ex.s.Snapshot(name)
		if err != nil {
			return out, err
		}
		st, err := ex.s.store(name)
		if err != nil {
			return out, err
		}
		e, err := st.Execution(ctx, l.Running)
		if err != nil {
			return out, err
		}
		ex.s.Log.Info("resuming execution", "study", name, "execution", e.ID)
		info, err := ex.start(name, snap, e)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

func (ex Executions) start(name string, snap *studies.Snapshot, e receipts.Execution) (run.ExecInfo, error) {
	x, err := ex.s.execution(name, e.ID)
	if err != nil {
		return run.ExecInfo{}, err
	}
	d, err := snap.DesignValue()
	if err != nil {
		return run.ExecInfo{}, err
	}
	walls, err := ex.executionWalls(name, d, x)
	if err != nil {
		return run.ExecInfo{}, err
	}
	if fileExists(x.EngineMarker()) {
		return ex.startEngine(name, x, snap, e)
	}
	st, err := ex.s.store(name)
	if err != nil {
		return run.ExecInfo{}, err
	}
	env, err := ex.s.runEnv()
	if err != nil {
		return run.ExecInfo{}, err
	}
	if err := ex.s.cardFromTries(); err != nil { // a counted run has the card to itself (try.go)
		return run.ExecInfo{}, err
	}
	h, err := run.Start(env, run.Spec{Study: name, Snapshot: snap, Store: st, Exec: e, Walls: walls,
		Dir: x.Dir(), Ended: ex.ended(name, e.ID), Prices: ex.trialPrices(name)})
	if err != nil {
		return run.ExecInfo{}, err
	}
	return ex.track(name, h), nil
}

// executionWalls are the execution's auto wall caps, fixed once: derived
// from this machine's validation runs when the execution first starts,
// kept in its folder, and read back on a resume and by the engine's plan,
// which publishes them to every worker. So a trial gets the same wall on
// a worker as here. A design with no auto wall has none.
func (ex Executions) executionWalls(name string, d *studies.Design, x layout.Execution) (map[string]studies.WallDerivation, error) {
	if len(d.AutoWallJobKinds()) == 0 {
		return nil, nil
	}
	path := x.Records().Walls()
	var walls map[string]studies.WallDerivation
	if err := layout.NoLink(path); err != nil {
		return nil, err
	}
	err := atomicfile.ReadJSON(path, &walls)
	if err == nil {
		return walls, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (it is the execution's derived wall caps; restore it, or start a new execution with rig study rerun)", path, err)
	}
	speeds, err := ex.s.measuredSpeeds(name, d, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("deriving the auto wall caps from this machine's validation runs: %w", err)
	}
	if walls, err = studies.DeriveWalls(d, speeds); err != nil {
		return nil, err
	}
	for _, jk := range d.AutoWallJobKinds() {
		if wd, ok := walls[jk]; ok {
			ex.s.Log.Info("derived wall cap", "study", name, "job_kind", jk, "wall", wd.Wall, "why", wd.Why)
		}
	}
	if err := os.MkdirAll(x.Dir(), 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteJSON(path, walls, 0o600); err != nil {
		return nil, err
	}
	return walls, nil
}

// engineMarker is an engine execution's engine.json: it makes a daemon
// restarted mid-run follow the workflow, and keeps the run's settings for
// a submit after the restart.
type engineMarker struct {
	Engine    string        `json:"engine"`
	Workflow  string        `json:"workflow"`
	InFlight  int           `json:"in_flight,omitempty"`
	StartWait time.Duration `json:"start_wait,omitempty"`
}

// runOptions are the request's engine settings.
func runOptions(r RunRequest) scaleout.RunOptions {
	return scaleout.RunOptions{InFlight: r.InFlight, StartWait: r.StartWait}
}

// startEngine submits the execution to the engine (the same execution twice
// is the same workflow) and follows it.
func (ex Executions) startEngine(name string, x layout.Execution, snap *studies.Snapshot, e receipts.Execution) (run.ExecInfo, error) {
	if ex.s.Engine == nil {
		return run.ExecInfo{}, fmt.Errorf("execution %s of %s runs through temporal, and this daemon has no Temporal cluster configured (start it with rig daemon --temporal HOST:PORT --spool DIR)", e.ID, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var m engineMarker
	if err := atomicfile.ReadJSON(x.EngineMarker(), &m); err != nil {
		return run.ExecInfo{}, err
	}
	if err := ex.s.Engine.Submit(ctx, name, snap, e, scaleout.RunOptions{InFlight: m.InFlight, StartWait: m.StartWait}); err != nil {
		return run.ExecInfo{}, err
	}
	h, err := ex.s.Engine.Follow(name, e, ex.ended(name, e.ID))
	if err != nil {
		return run.ExecInfo{}, err
	}
	return ex.track(name, h), nil
}

// track keeps a started execution as the study's running one.
func (ex Executions) track(name string, h execHandle) run.ExecInfo {
	ex.s.mu.Lock()
	ex.s.running[name] = h
	ex.s.mu.Unlock()
	return h.Info()
}

// ended records, in the study's lifecycle, how its execution ended.
func (ex Executions) ended(name, execID string) func(ctx context.Context, kind, why string) {
	return func(ctx context.Context, kind, why string) {
		who := "rig daemon"
		ex.s.mu.Lock()
		if c, ok := ex.s.cancelling[name]; ok && kind == studies.EventCancel {
			who = c
		}
		delete(ex.s.cancelling, name)
		ex.s.mu.Unlock()
		if _, err := ex.s.apply(ctx, name, studies.Event{Kind: kind, Actor: who, At: time.Now().UTC(), Execution: execID, Why: why}); err != nil {
			ex.s.Log.Error("recording lifecycle", "err", err)
		}
	}
}

// runEnv is what the runner needs from this daemon.
func (s *Service) runEnv() (run.Env, error) {
	in, err := provision.Load()
	if err != nil {
		return run.Env{}, err
	}
	return run.Env{Gates: s.Gates, Log: s.Log, NoSandbox: s.NoSandbox, Installed: in, Stored: s.receiptStored}, nil
}

// Cancel stops a study's running execution; its receipts stay.
func (ex Executions) Cancel(ctx context.Context, name string) (run.ExecInfo, error) {
	if _, err := ex.s.study(name); err != nil {
		return run.ExecInfo{}, err
	}
	ex.s.mu.Lock()
	st, ok := ex.s.running[name]
	ex.s.mu.Unlock()
	if !ok {
		return run.ExecInfo{}, fmt.Errorf("study %s has no running execution", name)
	}
	who, err := ex.s.actor(ctx, "")
	if err != nil {
		return run.ExecInfo{}, err
	}
	ex.s.mu.Lock()
	ex.s.cancelling[name] = who
	ex.s.mu.Unlock()
	st.Cancel()
	select {
	case <-st.Done():
	case <-ctx.Done():
		return st.Info(), ctx.Err()
	}
	return st.Info(), nil
}

func (ex Executions) execInfo(ctx context.Context, name, id string) (run.ExecInfo, error) {
	ex.s.mu.Lock()
	st, ok := ex.s.running[name]
	ex.s.mu.Unlock()
	if ok && st.Info().ID == id {
		return st.Info(), nil
	}
	execs, err := ex.s.executions(ctx, name)
	if err != nil {
		return run.ExecInfo{}, err
	}
	for _, e := range execs {
		if e.ID == id {
			return e, nil
		}
	}
	return run.ExecInfo{}, fmt.Errorf("study %s has no execution %s", name, id)
}

func (s *Service) executions(ctx context.Context, name string) ([]run.ExecInfo, error) {
	st, err := s.store(name)
	if err != nil {
		return nil, err
	}
	execs, err := st.Executions(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	live := s.running[name]
	s.mu.Unlock()
	var out []run.ExecInfo
	for _, e := range execs {
		if live != nil && live.Info().ID == e.ID {
			out = append(out, live.Info())
			continue
		}
		x, err := s.execution(name, e.ID)
		if err != nil {
			return nil, err
		}
		info := run.ExecInfo{ID: e.ID, Parent: e.Parent, Attempt: e.Attempt, Status: string(e.Status), StartedAt: e.CreatedAt,
			Records: x.Dir()}
		counted, err := st.Counted(ctx, e.ID)
		if err == nil {
			info.Done = len(counted)
		}
		if rs, err := st.Receipts(ctx, e.ID); err == nil {
			info.Failed = failedTrials(rs, counted)
			info.Done += info.Failed
			if fileExists(x.EngineMarker()) {
				info.Engine, info.Workers = "temporal", map[string]int{}
				for _, r := range rs {
					if w := r.Pins["worker"]; w != "" {
						info.Workers[w]++
					}
				}
			}
		}
		var plan studies.Plan
		if atomicfile.ReadJSON(x.Plan(), &plan) == nil {
			info.Planned = len(plan.Trials)
		}
		out = append(out, info)
	}
	return out, nil
}

// failedTrials counts the trials whose receipts are errors and that have no
// counted receipt: they ran, produced nothing to score, and wait for a rerun.
func failedTrials(rs []receipts.Receipt, counted map[receipts.TrialKey]receipts.Receipt) int {
	failed := map[receipts.TrialKey]bool{}
	for _, r := range rs {
		k := receipts.TrialKey{Arm: r.Arm, TaskID: r.TaskID, Repeat: r.Repeat}
		if _, ok := counted[k]; !ok && r.Outcome == receipts.Error {
			failed[k] = true
		}
	}
	return len(failed)
}

// Wait blocks until the study's running execution ends.
func (ex Executions) Wait(ctx context.Context, name string) (run.ExecInfo, error) {
	ex.s.mu.Lock()
	st, ok := ex.s.running[name]
	ex.s.mu.Unlock()
	if !ok {
		return run.ExecInfo{}, fmt.Errorf("study %s has no execution in this daemon", name)
	}
	select {
	case <-st.Done():
		return st.Info(), nil
	case <-ctx.Done():
		return st.Info(), ctx.Err()
	}
}

// RecordGovernorEvent appends a governor event to the store of the study whose
// execution is running, so every preemption and limit crossed is kept beside
// the receipts. With nothing running the event only goes to the daemon log.
func (ex Executions) RecordGovernorEvent(ctx context.Context, at time.Time, trial, kind string, detail any) {
	study, info, ok := ex.s.runningExecution()
	if !ok {
		return
	}
	exec := info.ID
	st, err := ex.s.store(study)
	if err != nil {
		return
	}
	raw, _ := json.Marshal(detail)
	if _, err := st.AppendGovernorEvent(ctx, receipts.GovernorEvent{At: at, ExecutionID: exec, Trial: trial, Kind: kind, Detail: raw}); err != nil {
		ex.s.Log.Error("recording a governor event", "study", study, "err", err)
	}
}

// runningExecution is the execution that owns the card now, if any: one
// runs at a time.
func (s *Service) runningExecution() (study string, info run.ExecInfo, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, r := range s.running {
		if i := r.Info(); i.Status == string(receipts.Running) {
			return name, i, true
		}
	}
	return "", run.ExecInfo{}, false
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// engineStudies is what the engine's coordinator reads of this daemon.
type engineStudies struct{ s *Service }

func (e engineStudies) Snapshot(study string) (*studies.Snapshot, error) { return e.s.Snapshot(study) }
func (e engineStudies) Store(study string) (*receipts.Store, error)      { return e.s.store(study) }

// ExecDir is the execution's folder through the layout. scaleout's
// interface has no error to return, so a refused name gives a path under
// /dev/null, where every open, create and mkdir fails (ENOTDIR): it fails
// closed. The coordinator reads the study's snapshot and store (both
// checked, with errors) before it asks for this folder.
func (e engineStudies) ExecDir(study, execution string) string {
	x, err := e.s.execution(study, execution)
	if err != nil {
		e.s.Log.Error("engine asked for an execution folder by a refused name", "study", study, "execution", execution, "err", err)
		return filepath.Join(os.DevNull, "refused-name")
	}
	return x.Dir()
}

// AfterTrials runs an engine execution's fidelity step on this host, once
// its workflow has run the trials and their rows are merged here: this
// host froze the study, so it has the pinned scorer and the arms' model
// files, and its governor watches the scorer as it watches a local run's.
// A design with no reference arm has no step.
func (e engineStudies) AfterTrials(ctx context.Context, study string, exec receipts.Execution, say func(current string)) error {
	snap, err := e.s.Snapshot(study)
	if err != nil {
		return err
	}
	d, err := snap.DesignValue()
	if err != nil {
		return err
	}
	if !run.HasFidelityStep(d) {
		return nil
	}
	st, err := e.s.store(study)
	if err != nil {
		return err
	}
	x, err := e.s.execution(study, exec.ID)
	if err != nil {
		return err
	}
	env, err := e.s.runEnv()
	if err != nil {
		return err
	}
	// The scorer has the card and the host's memory to itself, as a local
	// run's trials do.
	if err := e.s.cardForStep(ctx, say); err != nil {
		return err
	}
	e.s.Log.Info("fidelity step of an engine execution: its trials ran on the workers; each arm is scored here on the merged rows", "study", study, "execution", exec.ID)
	say("fidelity: starting on the merged rows")
	if err := run.MergedFidelity(ctx, env, run.Spec{Study: study, Snapshot: snap, Store: st, Exec: exec, Dir: x.Dir()}, say); err != nil {
		return err
	}
	e.s.Log.Info("fidelity step done", "study", study, "execution", exec.ID, "records", x.Records().Fidelity())
	return nil
}

// StartEngine connects the daemon to a Temporal cluster as the coordinator
// of its studies' scale-out runs.
func (ex Executions) StartEngine(ctx context.Context, cfg scaleout.Config) error {
	c, err := scaleout.NewCoordinator(ctx, cfg, ex.s.Home, engineStudies(ex), ex.s.Log)
	if err != nil {
		return err
	}
	ex.s.Engine = c
	ex.s.Log.Info("scale-out engine", "temporal", cfg.Address, "namespace", cfg.Namespace, "spool", cfg.Spool, "queue", c.Queue())
	return nil
}

// MergeRequest is `rig study merge`.
type MergeRequest struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
}

// Remerge brings an engine execution's spool in again: a no-op for every
// entry already merged, so it is safe at any time; an entry the engine
// never merged is merged now.
func (ex Executions) Remerge(ctx context.Context, req MergeRequest) (scaleout.RemergeSummary, error) {
	if req.Execution != "" {
		if _, err := ex.s.execution(req.Study, req.Execution); err != nil {
			return scaleout.RemergeSummary{}, err
		}
	}
	if ex.s.Engine == nil {
		return scaleout.RemergeSummary{}, fmt.Errorf("this daemon has no Temporal cluster configured, so it has no spool to merge (rig daemon --temporal HOST:PORT --spool DIR)")
	}
	if _, err := ex.s.store(req.Study); err != nil {
		return scaleout.RemergeSummary{}, err
	}
	exec, err := ex.engineExecution(ctx, req.Study, req.Execution)
	if err != nil {
		return scaleout.RemergeSummary{}, err
	}
	return ex.s.Engine.Remerge(ctx, req.Study, exec)
}

// EngineReplayRequest is `rig study replay`.
type EngineReplayRequest struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
	PerArm    int    `json:"per_arm"`
	Seed      uint64 `json:"seed"`
}

// EngineReplay replays a sample of an engine execution's merged trials on
// the workers, each on the queue its trial ran on.
func (ex Executions) EngineReplay(ctx context.Context, req EngineReplayRequest) ([]scaleout.ReplayResult, error) {
	if req.Execution != "" {
		if _, err := ex.s.execution(req.Study, req.Execution); err != nil {
			return nil, err
		}
	}
	if ex.s.Engine == nil {
		return nil, fmt.Errorf("this daemon has no Temporal cluster configured (rig daemon --temporal HOST:PORT --spool DIR); replay a local execution with rig study report --replay-sample")
	}
	exec, err := ex.engineExecution(ctx, req.Study, req.Execution)
	if err != nil {
		return nil, err
	}
	return ex.s.Engine.ReplaySample(ctx, req.Study, exec, max(req.PerArm, 1), req.Seed)
}

// engineExecution is the execution named, or the study's latest that ran
// through the engine.
func (ex Executions) engineExecution(ctx context.Context, study, named string) (string, error) {
	if named != "" {
		return named, nil
	}
	execs, err := ex.s.executions(ctx, study)
	if err != nil {
		return "", err
	}
	latest := ""
	for _, e := range execs {
		if e.Engine != "" {
			latest = e.ID
		}
	}
	if latest == "" {
		return "", fmt.Errorf("study %s has no execution that ran through the engine", study)
	}
	return latest, nil
}

// trialPrices is the dry run's price of one trial per arm, as the run's ETA
// starts from; nil when the plan cannot be priced (no validation run has
// measured this machine), and the ETA then waits for measured trials.
func (ex Executions) trialPrices(name string) map[string]time.Duration {
	est, _, _, _ := ex.s.price(context.Background(), name, "", io.Discard)
	if est == nil {
		return nil
	}
	out := map[string]time.Duration{}
	for _, a := range est.Arms {
		if a.Trials > 0 {
			out[a.Arm] = a.WallTime / time.Duration(a.Trials)
		}
	}
	return out
}
