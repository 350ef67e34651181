package run

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
	"rig/tasks/sandboxed"
)

// Env is everything an execution needs from the process that hosts it: the
// daemon today, a worker on another machine next. It is deliberately small,
// so that hosting the runner never means hosting the daemon.
type Env struct {
	// Gates are the governor's checks; nil gates refuse every trial (fail closed).
	Gates Gates
	Log   *slog.Logger
	// NoSandbox runs runtimes without namespaces; every receipt records it.
	NoSandbox bool
	// Installed is what this machine has provisioned (internal/provision.Load).
	Installed provision.Installed
	// Stored, when set, is told of each receipt a local execution stored
	// (the daemon's metrics); a worker's receipts are counted as merged.
	Stored func(rec receipts.Receipt)
	// Launch, when set, starts an arm's runtime in place of its build's own
	// server (runtimes.Build.Start): rig bench scale's synthetic runtime,
	// which times the engine's path with no model. Nil in every study.
	Launch func(ctx context.Context, b runtimes.Build, cfg runtimes.Config) (runtimes.Runtime, error)
	// Open, when set, opens the files a study names (model files to hash,
	// task banks and their audit records) for Assets and CheckPromptsFit in
	// place of os.Open: the daemon's opens them with the rights of the
	// caller it reads them for, and what it parses or hashes is the very
	// file it judged (peerfile.OpenAny).
	Open func(path string) (*os.File, error)
}

// open is env.Open, else os.Open.
func (env Env) open() func(string) (*os.File, error) {
	if env.Open != nil {
		return env.Open
	}
	return os.Open
}

// launch starts an arm's runtime: the build's server, or Launch's.
func (env Env) launch(ctx context.Context, b runtimes.Build, cfg runtimes.Config) (runtimes.Runtime, error) {
	if env.Launch != nil {
		return env.Launch(ctx, b, cfg)
	}
	return b.Start(ctx, cfg)
}

func (env Env) log() *slog.Logger {
	if env.Log == nil {
		return slog.Default()
	}
	return env.Log
}

// Graders is the task graders' registry, with test commands run inside the
// loopback-only sandbox unless NoSandbox.
func (env Env) Graders() *tasks.Registry {
	return sandboxed.Graders(env.NoSandbox)
}

// Spec is one execution of a frozen study.
type Spec struct {
	Study    string
	Snapshot *studies.Snapshot
	// Store is the study's store; the runner writes the execution's
	// receipts and its status there.
	Store *receipts.Store
	// Exec is the execution as stored (its id, attempt and plan seed).
	Exec receipts.Execution
	// Dir is the execution's directory: its plan, generation records and
	// the repositories Aider left.
	Dir string
	// Walls are the derived walls of the auto-wall job kinds
	// (studies.DeriveWalls); nil when the design has none.
	Walls map[string]studies.WallDerivation
	// Prices are the dry run's price of one trial per arm on this machine
	// (its table's wall time over its trials): the ETA prices an arm's
	// remaining trials at it until its own trials are measured. Nil when
	// the plan could not be priced.
	Prices map[string]time.Duration
	// Ended, when set, is told once the execution has ended and its status
	// is stored: kind is studies.EventFinish or studies.EventCancel.
	Ended func(ctx context.Context, kind, why string)
}

// LoadBanks reads the snapshot's banks by job kind, each checked against
// its digest at freeze: a bank that changed since is a stale asset.
func LoadBanks(snap *studies.Snapshot) (map[string]*tasks.Bank, error) {
	banks := map[string]*tasks.Bank{}
	for _, fb := range snap.Banks {
		b, err := tasks.LoadBank(fb.Path)
		if err != nil {
			return nil, err
		}
		if b.Hash != fb.SHA256 {
			return nil, &studies.StaleAssetError{Asset: "bank " + fb.Path, Want: fb.SHA256, Got: b.Hash}
		}
		banks[fb.JobKind] = b
	}
	return banks, nil
}

// PlanOf is an execution's plan, laid out from its seed: the same trials in
// the same blocks wherever it is laid out (the daemon's loop, the engine's
// coordinator, a resume).
func PlanOf(d *studies.Design, snap *studies.Snapshot, exec receipts.Execution) (*studies.Plan, error) {
	return studies.NewPlan(d, snap.Tasks(), studies.PlanOptions{Seed: int64(exec.PlanSeed)})
}

// KeepPlan writes the plan the execution runs into its records: the one
// writer of plan.json.
func KeepPlan(records layout.Records, plan *studies.Plan) error {
	return atomicfile.WriteJSON(records.Plan(), plan, 0o600)
}

// Handle follows one running execution.
type Handle struct {
	mu     sync.Mutex
	info   ExecInfo
	cancel context.CancelFunc
	done   chan struct{}
}

// Info is the execution's progress now.
func (h *Handle) Info() ExecInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.info
}

// Cancel stops the execution; the receipts it stored stay.
func (h *Handle) Cancel() { h.cancel() }

// Done is closed once the execution has ended and its status is stored.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Start runs the execution in the background: every planned trial that has
// no counted receipt yet, in its runtime under the governor, each ending in a
// receipt and, when the runtime answered, generation rows. A resumed
// execution continues where it stopped; no trial is scored twice.
func Start(env Env, spec Spec) (*Handle, error) {
	r, err := newTrialRunner(env, spec.Study, spec.Snapshot, spec.Exec, layout.Records(spec.Dir).Work(), spec.Walls)
	if err != nil {
		return nil, err
	}
	x := &execution{trialRunner: r, store: spec.Store, recDir: spec.Dir, writers: map[string]*genrecord.Writer{},
		ended: spec.Ended, prices: spec.Prices}
	var walls []string
	for _, jk := range r.design.AutoWallJobKinds() {
		walls = append(walls, spec.Walls[jk].String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	x.state = &Handle{cancel: cancel, done: make(chan struct{}),
		info: ExecInfo{ID: spec.Exec.ID, Parent: spec.Exec.Parent, Attempt: spec.Exec.Attempt, Status: string(receipts.Running), StartedAt: time.Now().UTC(), Records: x.recDir, Walls: walls}}
	go func() {
		defer close(x.state.done)
		err := x.loop(ctx)
		x.finish(err)
	}()
	return x.state, nil
}
