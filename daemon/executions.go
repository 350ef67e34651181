package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/receipts"
	"rig/scaleout"
	"rig/studies"
	"rig/studies/run"
)

// RunRequest is `rig study run`.
type RunRequest struct {
	Study  string `json:"study"`
	Key    string `json:"key"`
	Actor  string `json:"actor"`
	Parent string `json:"parent,omitempty"` // rerun of this execution
	// Engine is "temporal" to spread the trials over rig workers through
	// the daemon's Temporal cluster; empty or "local" runs on this card.
	Engine string `json:"engine,omitempty"`
}

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
func (s *Service) Run(ctx context.Context, req RunRequest) (run.ExecInfo, error) {
	snap, err := s.Snapshot(req.Study)
	if err != nil {
		return run.ExecInfo{}, err
	}
	st, err := s.store(req.Study)
	if err != nil {
		return run.ExecInfo{}, err
	}
	body, _ := json.Marshal(studies.RunBody{Study: req.Study, SnapshotHash: snap.Hash, Parent: req.Parent})
	if req.Key != "" {
		if id, found, err := st.LookupIdempotency(ctx, req.Key, body); err != nil {
			return run.ExecInfo{}, err
		} else if found {
			return s.execInfo(ctx, req.Study, id)
		}
	}
	if name, info, ok := s.runningExecution(); ok {
		if name == req.Study && req.Parent == "" {
			// The study is already running (perhaps resumed after a
			// restart): asking again follows that execution.
			return info, nil
		}
		return run.ExecInfo{}, fmt.Errorf("study %s is running execution %s; one execution at a time owns the card (rig study cancel %s)", name, info.ID, name)
	}
	switch req.Engine {
	case "", "local":
	case "temporal":
		if s.Engine == nil {
			return run.ExecInfo{}, fmt.Errorf("--engine temporal: this daemon has no Temporal cluster configured (start it with rig daemon --temporal HOST:PORT --spool DIR; see docs/scale-out.md)")
		}
		d, err := snap.DesignValue()
		if err != nil {
			return run.ExecInfo{}, err
		}
		if err := scaleout.CheckDesign(d); err != nil {
			return run.ExecInfo{}, err
		}
	default:
		return run.ExecInfo{}, fmt.Errorf("--engine %q: the engines are local (this card) and temporal (rig workers through Temporal)", req.Engine)
	}
	if err := s.checkGates(ctx, req.Study, snap); err != nil {
		return run.ExecInfo{}, err
	}
	// Every pinned asset is hashed again: a model, runtime, bank or licence
	// registry changed since the freeze is a stale asset, never run.
	a, err := s.assets()
	if err != nil {
		return run.ExecInfo{}, err
	}
	if err := studies.CheckStale(ctx, snap, a); err != nil {
		return run.ExecInfo{}, err
	}
	if err := s.checkMonthlyBudget(ctx, req.Study); err != nil {
		return run.ExecInfo{}, err
	}
	execs, err := st.Executions(ctx)
	if err != nil {
		return run.ExecInfo{}, err
	}
	e := receipts.Execution{ID: fmt.Sprintf("exec-%d", len(execs)+1), Attempt: 1, Status: receipts.Running, DesignHash: snap.DesignHash, CreatedAt: time.Now().UTC()}
	if req.Parent != "" {
		if err := layout.CheckExecutionID(req.Parent); err != nil {
			return run.ExecInfo{}, err
		}
		parent, err := st.Execution(ctx, req.Parent)
		if err != nil {
			return run.ExecInfo{}, err
		}
		e.Parent, e.Attempt = parent.ID, parent.Attempt+1
	}
	e.PlanSeed = uint64(studies.PlanSeed(snap.Hash, e.Attempt))
	if req.Key != "" {
		if existing, replay, err := st.ClaimIdempotency(ctx, req.Key, body, e.ID); err != nil {
			return run.ExecInfo{}, err
		} else if replay {
			return s.execInfo(ctx, req.Study, existing)
		}
	}
	if err := st.PutExecution(ctx, e); err != nil {
		return run.ExecInfo{}, err
	}
	actor, err := s.actor(ctx, req.Actor)
	if err != nil {
		return run.ExecInfo{}, err
	}
	if req.Engine == "temporal" {
		x, err := s.execution(req.Study, e.ID)
		if err != nil {
			return run.ExecInfo{}, err
		}
		if err := os.MkdirAll(x.Dir(), 0o700); err != nil {
			return run.ExecInfo{}, err
		}
		// The marker makes a daemon restarted mid-run follow the workflow
		// again instead of running the trials here.
		if err := atomicfile.WriteJSON(x.EngineMarker(), map[string]string{"engine": "temporal", "workflow": scaleout.WorkflowID(req.Study, e.ID)}, 0o600); err != nil {
			return run.ExecInfo{}, err
		}
	}
	if _, err := s.apply(ctx, req.Study, studies.Event{Kind: studies.EventRun, Actor: actor, At: time.Now().UTC(), Execution: e.ID, Why: "run " + e.ID}); err != nil {
		return run.ExecInfo{}, err
	}
	return s.start(req.Study, snap, e)
}

// Resume restarts every execution that was running when the daemon stopped.
// Receipts already stored are kept; the plan is rebuilt from its seed, so the
// execution continues where it stopped, and no trial is scored twice.
func (s *Service) Resume(ctx context.Context) ([]run.ExecInfo, error) {
	names, err := s.List()
	if err != nil {
		return nil, err
	}
	var out []run.ExecInfo
	for _, name := range names {
		l, err := s.lifecycle(name)
		if err != nil || l.State != studies.Running || l.Running == "" {
			continue
		}
		snap, err := s.Snapshot(name)
		if err != nil {
			return out, err
		}
		st, err := s.store(name)
		if err != nil {
			return out, err
		}
		e, err := st.Execution(ctx, l.Running)
		if err != nil {
			return out, err
		}
		s.Log.Info("resuming execution", "study", name, "execution", e.ID)
		info, err := s.start(name, snap, e)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

func (s *Service) start(name string, snap *studies.Snapshot, e receipts.Execution) (run.ExecInfo, error) {
	x, err := s.execution(name, e.ID)
	if err != nil {
		return run.ExecInfo{}, err
	}
	if fileExists(x.EngineMarker()) {
		return s.startEngine(name, snap, e)
	}
	d, err := snap.DesignValue()
	if err != nil {
		return run.ExecInfo{}, err
	}
	st, err := s.store(name)
	if err != nil {
		return run.ExecInfo{}, err
	}
	env, err := s.runEnv()
	if err != nil {
		return run.ExecInfo{}, err
	}
	var walls map[string]studies.WallDerivation
	if len(d.AutoWallJobKinds()) > 0 {
		speeds, err := s.measuredSpeeds(name, d, io.Discard)
		if err != nil {
			return run.ExecInfo{}, fmt.Errorf("deriving the auto wall caps from this machine's validation runs: %w", err)
		}
		if walls, err = studies.DeriveWalls(d, speeds); err != nil {
			return run.ExecInfo{}, err
		}
		for _, jk := range d.AutoWallJobKinds() {
			if wd, ok := walls[jk]; ok {
				s.Log.Info("derived wall cap", "study", name, "job_kind", jk, "wall", wd.Wall, "why", wd.Why)
			}
		}
	}
	h, err := run.Start(env, run.Spec{Study: name, Snapshot: snap, Store: st, Exec: e, Walls: walls,
		Dir: x.Dir(), Ended: s.ended(name, e.ID), Prices: s.trialPrices(name)})
	if err != nil {
		return run.ExecInfo{}, err
	}
	return s.track(name, h), nil
}

// startEngine submits the execution to the engine (the same execution twice
// is the same workflow) and follows it.
func (s *Service) startEngine(name string, snap *studies.Snapshot, e receipts.Execution) (run.ExecInfo, error) {
	if s.Engine == nil {
		return run.ExecInfo{}, fmt.Errorf("execution %s of %s runs through temporal, and this daemon has no Temporal cluster configured (start it with rig daemon --temporal HOST:PORT --spool DIR)", e.ID, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Engine.Submit(ctx, name, snap, e); err != nil {
		return run.ExecInfo{}, err
	}
	h, err := s.Engine.Follow(name, e, s.ended(name, e.ID))
	if err != nil {
		return run.ExecInfo{}, err
	}
	return s.track(name, h), nil
}

// track keeps a started execution as the study's running one.
func (s *Service) track(name string, h execHandle) run.ExecInfo {
	s.mu.Lock()
	s.running[name] = h
	s.mu.Unlock()
	return h.Info()
}

// ended records, in the study's lifecycle, how its execution ended.
func (s *Service) ended(name, execID string) func(ctx context.Context, kind, why string) {
	return func(ctx context.Context, kind, why string) {
		who := "rig daemon"
		s.mu.Lock()
		if c, ok := s.cancelling[name]; ok && kind == studies.EventCancel {
			who = c
		}
		delete(s.cancelling, name)
		s.mu.Unlock()
		if _, err := s.apply(ctx, name, studies.Event{Kind: kind, Actor: who, At: time.Now().UTC(), Execution: execID, Why: why}); err != nil {
			s.Log.Error("recording lifecycle", "err", err)
		}
	}
}

// runEnv is what the runner needs from this daemon.
func (s *Service) runEnv() (run.Env, error) {
	in, err := provision.Load()
	if err != nil {
		return run.Env{}, err
	}
	return run.Env{Gates: s.Gates, Log: s.Log, NoSandbox: s.NoSandbox, Installed: in}, nil
}

// Cancel stops a study's running execution; its receipts stay.
func (s *Service) Cancel(ctx context.Context, name string) (run.ExecInfo, error) {
	if _, err := s.study(name); err != nil {
		return run.ExecInfo{}, err
	}
	s.mu.Lock()
	st, ok := s.running[name]
	s.mu.Unlock()
	if !ok {
		return run.ExecInfo{}, fmt.Errorf("study %s has no running execution", name)
	}
	who, err := s.actor(ctx, "")
	if err != nil {
		return run.ExecInfo{}, err
	}
	s.mu.Lock()
	s.cancelling[name] = who
	s.mu.Unlock()
	st.Cancel()
	select {
	case <-st.Done():
	case <-ctx.Done():
		return st.Info(), ctx.Err()
	}
	return st.Info(), nil
}

func (s *Service) execInfo(ctx context.Context, name, id string) (run.ExecInfo, error) {
	s.mu.Lock()
	st, ok := s.running[name]
	s.mu.Unlock()
	if ok && st.Info().ID == id {
		return st.Info(), nil
	}
	execs, err := s.executions(ctx, name)
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
func (s *Service) Wait(ctx context.Context, name string) (run.ExecInfo, error) {
	s.mu.Lock()
	st, ok := s.running[name]
	s.mu.Unlock()
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
func (s *Service) RecordGovernorEvent(ctx context.Context, at time.Time, trial, kind string, detail any) {
	study, info, ok := s.runningExecution()
	if !ok {
		return
	}
	exec := info.ID
	st, err := s.store(study)
	if err != nil {
		return
	}
	raw, _ := json.Marshal(detail)
	if _, err := st.AppendGovernorEvent(ctx, receipts.GovernorEvent{At: at, ExecutionID: exec, Trial: trial, Kind: kind, Detail: raw}); err != nil {
		s.Log.Error("recording a governor event", "study", study, "err", err)
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

// StartEngine connects the daemon to a Temporal cluster as the coordinator
// of its studies' scale-out runs.
func (s *Service) StartEngine(ctx context.Context, cfg scaleout.Config) error {
	c, err := scaleout.NewCoordinator(ctx, cfg, s.Home, engineStudies{s}, s.Log)
	if err != nil {
		return err
	}
	s.Engine = c
	s.Log.Info("scale-out engine", "temporal", cfg.Address, "namespace", cfg.Namespace, "spool", cfg.Spool, "queue", c.Queue())
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
func (s *Service) Remerge(ctx context.Context, req MergeRequest) (scaleout.RemergeSummary, error) {
	if req.Execution != "" {
		if _, err := s.execution(req.Study, req.Execution); err != nil {
			return scaleout.RemergeSummary{}, err
		}
	}
	if s.Engine == nil {
		return scaleout.RemergeSummary{}, fmt.Errorf("this daemon has no Temporal cluster configured, so it has no spool to merge (rig daemon --temporal HOST:PORT --spool DIR)")
	}
	if _, err := s.store(req.Study); err != nil {
		return scaleout.RemergeSummary{}, err
	}
	exec, err := s.engineExecution(ctx, req.Study, req.Execution)
	if err != nil {
		return scaleout.RemergeSummary{}, err
	}
	return s.Engine.Remerge(ctx, req.Study, exec)
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
func (s *Service) EngineReplay(ctx context.Context, req EngineReplayRequest) ([]scaleout.ReplayResult, error) {
	if req.Execution != "" {
		if _, err := s.execution(req.Study, req.Execution); err != nil {
			return nil, err
		}
	}
	if s.Engine == nil {
		return nil, fmt.Errorf("this daemon has no Temporal cluster configured (rig daemon --temporal HOST:PORT --spool DIR); replay a local execution with rig study report --replay-sample")
	}
	exec, err := s.engineExecution(ctx, req.Study, req.Execution)
	if err != nil {
		return nil, err
	}
	return s.Engine.ReplaySample(ctx, req.Study, exec, max(req.PerArm, 1), req.Seed)
}

// engineExecution is the execution named, or the study's latest that ran
// through the engine.
func (s *Service) engineExecution(ctx context.Context, study, named string) (string, error) {
	if named != "" {
		return named, nil
	}
	execs, err := s.executions(ctx, study)
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
func (s *Service) trialPrices(name string) map[string]time.Duration {
	est, _, _, _ := s.price(context.Background(), name, "", io.Discard)
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
