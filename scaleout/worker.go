package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/internal/offload"
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/runtimes"
	"rig/studies"
)

// WorkerOptions configure `rig worker`.
type WorkerOptions struct {
	Config Config
	// ID names the worker in receipts and status; hostname-pid when empty.
	ID string
	// WorkDir holds the runtimes' scratch while trials run.
	WorkDir   string
	Installed provision.Installed
	// Gates are the worker's own governor (run/gates).
	Gates     run.Gates
	NoSandbox bool
	Log       *slog.Logger
	// Queues, when set, are served instead of the ones this machine's
	// builds name (a site that routes by hand). Each trial is still checked
	// against this machine's builds, and refused when they differ.
	Queues []string
	// CardClass is this machine's card class ("cpu" without a GPU).
	CardClass string
	// Study, when set, must have a published snapshot at start: a worker
	// started for a study it cannot run refuses at once.
	Study, Execution string
	// ModelsDir is a shared models folder: a model a trial names is found
	// there by its sha256 (file SHA256, SHA256.gguf or sha256-SHA256) when
	// it is not provisioned in the worker's own cache.
	ModelsDir string
	// Launch, when set, starts an arm's runtime in place of its build's
	// server (run.Env.Launch): the synthetic runtime of rig bench scale's
	// fleet (bench/scale), whose trials are a timed sleep through this
	// worker's real checks, runner and spool. Nil in a real worker.
	Launch func(ctx context.Context, b runtimes.Build, cfg runtimes.Config) (runtimes.Runtime, error)
}

// Worker hosts the trial runner for the engine: one runtime at a time, and
// as many of its arm's trials at once as the arm has slots (pins.slots).
type Worker struct {
	opts   WorkerOptions
	client client.Client
	log    *slog.Logger

	gate   *trialGate // one arm's trials at a time, up to its slots: one runtime per card
	slot   *cardSlot  // the pollers' slots: a trial is taken only when it can run now
	hostMu sync.Mutex
	hosts  map[string]*run.Host
	// attempt runs a trial the checks let through (runAttempt; a test's
	// fake trial activity replaces it).
	attempt func(ctx context.Context, in TrialInput, model string) (TrialResult, error)
	// out keeps each finished result until the engine takes it (outbox.go).
	out *outbox

	healthMu sync.Mutex
	failed   []Failed          // the checks failed at the last look; empty while polling
	missing  map[string]string // model sha256 a trial named and not found here → the snapshot's path
	// the study check's last result and when (Run's goroutine only)
	studyFailed []Failed
	studyAt     time.Time

	pollMu  sync.Mutex
	pollers map[string]worker.Worker // by queue, while taking trials
	refused map[string]string        // queue → why this worker stopped serving it
	paused  string                   // why trials are not taken (governor), empty when taking

	// What the worker advertises (advertise.go).
	advertMu     sync.Mutex
	designSlots  map[string]int // queue → widest slots the frozen designs known here pin for its arms
	runningQueue string         // the queue of the arm whose runtime runs, "" before the first trial
	lastAdvert   Advert         // the advertisement last written (Run's goroutine only)
}

// NewWorker dials the cluster and checks what the worker can serve.
func NewWorker(ctx context.Context, opts WorkerOptions) (*Worker, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.ID == "" {
		h, _ := os.Hostname()
		opts.ID = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if opts.CardClass == "" {
		opts.CardClass = "cpu"
	}
	if opts.Study != "" {
		if opts.Execution == "" {
			return nil, fmt.Errorf("worker for study %s: %w", opts.Study, &NoSnapshotError{Study: opts.Study, Execution: opts.Execution,
				Path: opts.Config.Spool, Err: errors.New("no --execution given")})
		}
		x, err := execSpool(opts.Config.Spool, opts.Study, opts.Execution)
		if err != nil {
			return nil, fmt.Errorf("worker for study %s: %w", opts.Study, err)
		}
		if _, err := os.Stat(x.Snapshot()); err != nil {
			return nil, fmt.Errorf("worker for study %s: %w", opts.Study, &NoSnapshotError{Study: opts.Study, Execution: opts.Execution,
				Path: x.Snapshot(), Err: err})
		}
	}
	if len(opts.Queues) == 0 {
		for _, kind := range []string{"llama-server", offload.ComponentLlamaServerCUDA, "ollama", offload.ComponentOllamaCUDA} {
			b, err := runtimes.BuildOf(opts.Installed, kind)
			if err != nil {
				opts.Log.Info("runtime not provisioned here: its queue is not served", "runtime", kind, "err", err)
				continue
			}
			opts.Queues = append(opts.Queues, Queue(kind, b.BinarySHA256, opts.CardClass))
		}
		opts.Queues = append(opts.Queues, serverQueues(opts)...)
	}
	if len(opts.Queues) == 0 {
		return nil, errors.New("this worker can serve no queue: no runtime is provisioned (run make setup)")
	}
	cl, err := opts.Config.Dial(ctx, opts.ID, opts.Log)
	if err != nil {
		return nil, err
	}
	w := &Worker{opts: opts, client: cl, log: opts.Log, gate: newTrialGate(), slot: newCardSlot(), hosts: map[string]*run.Host{}, pollers: map[string]worker.Worker{},
		refused: map[string]string{}, missing: map[string]string{},
		failed: []Failed{{Check: "start", Why: "not polling yet: the worker is starting"}}}
	w.attempt = w.runAttempt
	w.out = newOutbox(cl, opts.ID, opts.Log)
	w.checkBuilds()
	return w, nil
}

// Queues are the task queues this worker serves.
func (w *Worker) Queues() []string { return slices.Clone(w.opts.Queues) }

// ID is the worker's name.
func (w *Worker) ID() string { return w.opts.ID }

// Slots is how many trials the worker takes at once now: the slots of the
// arm whose runtime it runs (1 before its first trial). It is on every
// trial's heartbeat and in the worker's log when it changes.
func (w *Worker) Slots() int { return w.slot.slots() }

// Run takes trials until ctx ends. While a check fails (health.go: the
// governor not ready, the study's snapshot or a model not here, no queue
// its builds serve) the worker stops polling, so the engine hands its
// trials to others, and says why in its log and through Ready.
func (w *Worker) Run(ctx context.Context) error {
	defer w.client.Close()
	// Results the engine has not taken yet get the pollers' stop timeout
	// to go through, before the client closes.
	defer w.out.close(5 * time.Second)
	defer w.stopPolling("shutting down")
	defer w.withdraw()
	defer func() {
		for _, h := range w.hosts {
			h.Close(context.Background())
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var saidIdle time.Time // when the log last said why no trial is taken
	saidWhy := ""
	for {
		failed := w.check(ctx)
		w.healthMu.Lock()
		w.failed = failed
		w.healthMu.Unlock()
		if len(failed) > 0 {
			why := (&NotReadyError{Worker: w.opts.ID, Failed: failed}).Error()
			w.stopPolling(why)
			w.withdraw()
			// At start, every minute, and when the reasons change: a worker
			// held from its first second has no poller to stop, and would
			// otherwise sit idle with nothing in its log.
			if time.Since(saidIdle) >= time.Minute || why != saidWhy {
				for _, f := range failed {
					w.log.Warn("takes no trials: "+f.Check+" not ready", "worker", w.opts.ID, "why", f.Why)
				}
				saidIdle, saidWhy = time.Now(), why
			}
		} else if err := w.startPolling(); err != nil {
			return err
		} else {
			saidWhy = ""
			w.advertise(time.Now())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (w *Worker) startPolling() error {
	w.pollMu.Lock()
	defer w.pollMu.Unlock()
	if w.paused != "" {
		w.log.Info("taking trials again", "worker", w.opts.ID, "was", w.paused)
		w.paused = ""
	}
	for _, q := range w.opts.Queues {
		if _, ok := w.pollers[q]; ok {
			continue
		}
		if _, ok := w.refused[q]; ok {
			continue
		}
		// Every queue's poller draws on the worker's one card slot (slot.go),
		// one poll at a time per queue: the worker takes a trial only when
		// it can run it now.
		tuner, err := w.slot.tuner()
		if err != nil {
			return err
		}
		p := worker.New(w.client, q, worker.Options{
			Identity:                   w.opts.ID,
			Tuner:                      tuner,
			ActivityTaskPollerBehavior: worker.NewPollerBehaviorSimpleMaximum(worker.PollerBehaviorSimpleMaximumOptions{MaximumNumberOfPollers: 1}),
			DisableWorkflowWorker:      true,
			WorkerStopTimeout:          5 * time.Second,
		})
		RegisterTrialActivity(p, w.out.trialActivity(w.runTrial))
		p.RegisterActivityWithOptions(w.replayEntry, activity.RegisterOptions{Name: actReplay})
		if err := p.Start(); err != nil {
			return fmt.Errorf("polling %s: %w", q, err)
		}
		w.pollers[q] = p
		w.log.Info("taking trials", "worker", w.opts.ID, "queue", q)
	}
	return nil
}

func (w *Worker) stopPolling(why string) {
	w.pollMu.Lock()
	ps := w.pollers
	w.pollers = map[string]worker.Worker{}
	if len(ps) > 0 {
		w.paused = why
		w.log.Warn("stops taking trials", "worker", w.opts.ID, "why", why)
	}
	w.pollMu.Unlock()
	for _, p := range ps {
		// Stop waits for a trial in flight only up to WorkerStopTimeout; its
		// heartbeat then stops and the engine reruns it elsewhere.
		go p.Stop()
	}
}

// refuseQueue stops serving one queue for good: this worker's stack is not
// the one the queue names.
func (w *Worker) refuseQueue(q, why string) {
	w.pollMu.Lock()
	w.refused[q] = why
	p, ok := w.pollers[q]
	delete(w.pollers, q)
	w.pollMu.Unlock()
	if ok {
		go p.Stop()
	}
	w.log.Error("refuses the queue and stops serving it", "worker", w.opts.ID, "queue", q, "why", why)
}

// refuse is a trial this worker cannot serve: nothing ran. It is benign
// to the SDK, which would otherwise log each one at ERROR ("Activity
// error."): a busy worker sending a trial back is the normal case on a
// worker of several queues, and the worker says itself why it stopped
// polling when that is the reason.
func refuse(format string, args ...any) error {
	return temporal.NewApplicationErrorWithOptions(fmt.Sprintf(format, args...), ErrRefused,
		temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
}

// runTrial is the trial activity: the worker's checks, then one attempt on
// the runner, its evidence left in the spool.
func (w *Worker) runTrial(ctx context.Context, in TrialInput) (TrialResult, error) {
	// One arm's trials at a time, up to its slots. The card slots (slot.go)
	// start no poll while all are taken, but a poll already out on another
	// queue can still bring one, and so can a trial of another arm: it goes
	// back at once, to be taken by a worker that can run it, rather than
	// wait here behind the running ones.
	if !w.gate.admit(trialArm(in)) {
		return TrialResult{}, refuse("worker %s: busy with other trials; %s goes back to its queue at once (refused, not run)", w.opts.ID, in.Key)
	}
	defer w.gate.done()
	// The heartbeat starts with the activity.
	stop := heartbeat(ctx, attemptBeat{Key: in.Key, Worker: w.opts.ID, Started: time.Now().UTC(), Slots: w.Slots()})
	defer stop()
	// The runtime's stack must be the queue's: a build that differs is
	// refused, never run, and the queue is no longer served here.
	got, err := w.stackSHA256(in)
	var nosnap *NoSnapshotError
	if errors.As(err, &nosnap) {
		return TrialResult{}, refuse("worker %s: %v (refused, not run)", w.opts.ID, err)
	}
	if err != nil || got != in.BinarySHA256 {
		if err != nil {
			got = err.Error()
		}
		w.refuseQueue(in.Queue, fmt.Sprintf("the trial needs %s with binary sha256 %s; this worker's is %s", in.Runtime, in.BinarySHA256, got))
		return TrialResult{}, refuse("worker %s: trial %s needs %s built as %s; this worker's build is %s (refused, not run)", w.opts.ID, in.Key, in.Runtime, in.BinarySHA256, got)
	}
	if err := w.opts.Gates.Ready(ctx); err != nil {
		w.stopPolling("governor not ready: " + err.Error())
		return TrialResult{}, refuse("worker %s: governor not ready: %v (refused, not run)", w.opts.ID, err)
	}
	if _, err := studies.ParseTrialKey(in.Key); err != nil {
		return TrialResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrMismatch, nil)
	}
	// The model by its content, this worker's own copy: a model not here
	// is refused (never a lost attempt), and the worker stops polling until
	// it is here.
	model, err := w.trialModel(in)
	if err != nil {
		w.stopPolling("model not here: " + err.Error())
		return TrialResult{}, refuse("worker %s: trial %s: %v (refused, not run)", w.opts.ID, in.Key, err)
	}
	return w.attempt(ctx, in, model)
}

// runAttempt runs one attempt on the runner, the model file being model,
// and leaves its evidence in the spool.
func (w *Worker) runAttempt(ctx context.Context, in TrialInput, model string) (TrialResult, error) {
	started := time.Now().UTC()
	key, err := studies.ParseTrialKey(in.Key)
	if err != nil {
		return TrialResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrMismatch, nil)
	}
	stack, err := w.stackSHA256(in)
	if err != nil {
		return TrialResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("worker %s: %v", w.opts.ID, err), ErrMismatch, err)
	}
	host, err := w.host(in, model)
	if err != nil {
		var nosnap *NoSnapshotError
		if errors.As(err, &nosnap) {
			return TrialResult{}, refuse("worker %s: %v", w.opts.ID, err)
		}
		return TrialResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("worker %s: %v", w.opts.ID, err), ErrMismatch, err)
	}
	w.takeSlots(in, host.Slots(mustArm(in.Key)))
	w.log.Info("trial started", "worker", w.opts.ID, "trial", in.Key, "attempt", in.Attempt, "queue", in.Queue, "slots", w.Slots())
	x, err := execSpool(w.opts.Config.Spool, in.Study, in.Execution)
	if err != nil {
		return TrialResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("worker %s: %v", w.opts.ID, err), ErrMismatch, err)
	}
	trials := x.Trials()
	entry := entryName(in.Key, in.Attempt, w.opts.ID)
	tmp := filepath.Join(trials, entry+partial)
	os.RemoveAll(tmp)
	res, err := host.RunTrial(ctx, key, in.Attempt, in.Parent, tmp)
	if errors.Is(err, run.ErrBusy) {
		os.RemoveAll(tmp)
		return TrialResult{}, refuse("worker %s: %v (refused, not run)", w.opts.ID, err)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return TrialResult{}, fmt.Errorf("worker %s: %w", w.opts.ID, err)
	}
	raw, err := json.Marshal(res.Receipt)
	if err != nil {
		return TrialResult{}, err
	}
	files := layout.Records(tmp)
	if err := atomicfile.WriteBytes(files.Receipt(), raw, 0o644); err != nil {
		return TrialResult{}, err
	}
	out := TrialResult{Study: in.Study, Execution: in.Execution, Key: in.Key, Attempt: in.Attempt, Worker: w.opts.ID, Entry: entry, ReceiptSHA256: sha256Hex(raw),
		Outcome: res.Receipt.Outcome, Runtime: in.Runtime + "@" + stack, Started: started}
	if _, err := os.Stat(files.TrialRecord()); err == nil {
		if out.RecordSHA256, err = fileSHA256(files.TrialRecord()); err != nil {
			return TrialResult{}, err
		}
	}
	final := filepath.Join(trials, entry)
	os.RemoveAll(final)
	if err := os.Rename(tmp, final); err != nil {
		return TrialResult{}, err
	}
	w.log.Info("trial done", "worker", w.opts.ID, "trial", in.Key, "attempt", in.Attempt, "outcome", out.Outcome)
	return out, nil
}

// heartbeat tells the engine every 2 s that the activity is alive, until
// stop is called: a killed worker stops, and the engine notices. The engine
// keeps the last detail (which worker, since when) for the workflow to put
// on the lost attempt's receipt (lost.go). The first
// beat comes after 2 s, not at once: the heartbeat timeout already runs
// from the activity's start, and each beat is a write to the chunk's
// workflow that every other trial of it waits behind (a fleet's trials
// beat once each for nothing before).
func heartbeat(ctx context.Context, detail attemptBeat) (stop func()) {
	hb, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-hb.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, detail)
			}
		}
	}()
	return cancel
}

// host is the runner for one execution, made on the first trial of it.
// Its snapshot's model paths are this worker's own files of the same
// sha256 (model for the trial's arm), not the coordinator's paths.
func (w *Worker) host(in TrialInput, model string) (*run.Host, error) {
	w.hostMu.Lock()
	defer w.hostMu.Unlock()
	id := in.Study + "/" + in.Execution
	if h, ok := w.hosts[id]; ok {
		return h, nil
	}
	snap, walls, err := readPublished(w.opts.Config.Spool, in.Study, in.Execution, in.DesignHash)
	if err != nil {
		return nil, err
	}
	w.knowDesign(snap)
	for i, a := range snap.Arms {
		switch {
		case a.Name == mustArm(in.Key) && model != "":
			snap.Arms[i].ModelPath = model
		case a.ModelSHA256 != "":
			if p, err := w.localModel(a.ModelSHA256, a.ModelPath); err == nil {
				snap.Arms[i].ModelPath = p
			}
		}
	}
	fa, ok := snap.Arm(mustArm(in.Key))
	if ok && fa.ModelSHA256 != in.ModelSHA256 {
		return nil, fmt.Errorf("trial %s: the snapshot's model is %s, the trial's %s", in.Key, fa.ModelSHA256, in.ModelSHA256)
	}
	h, err := run.NewHost(run.Env{Gates: w.opts.Gates, Log: w.log, NoSandbox: w.opts.NoSandbox, Installed: w.opts.Installed, Launch: w.opts.Launch},
		run.HostSpec{Study: in.Study, Snapshot: snap, Exec: execOf(in), WorkDir: filepath.Join(w.opts.WorkDir, in.Study, in.Execution), Walls: walls})
	if err != nil {
		return nil, err
	}
	// One runtime per card: the runner of another execution stops its own.
	for k, o := range w.hosts {
		o.Close(context.Background())
		delete(w.hosts, k)
	}
	w.hosts[id] = h
	return h, nil
}

func execOf(in TrialInput) receipts.Execution { return receipts.Execution{ID: in.Execution} }

// takeSlots makes the arm's slots the trials the worker takes at once, and
// says so in its log when they change: what the worker advertises.
func (w *Worker) takeSlots(in TrialInput, n int) {
	w.gate.setSlots(trialArm(in), n)
	w.advertMu.Lock()
	w.runningQueue = in.Queue
	w.advertMu.Unlock()
	if was := w.slot.slots(); was != n {
		w.slot.setMost(n)
		w.log.Info("serves its arm's slots", "worker", w.opts.ID, "arm", mustArm(in.Key), "slots", n, "was", was)
	}
}

// trialArm names a trial's arm within its execution: the trials that may share
// a runtime's slots.
func trialArm(in TrialInput) string { return in.Study + "/" + in.Execution + "/" + mustArm(in.Key) }

func mustArm(key string) string {
	k, _ := studies.ParseTrialKey(key)
	return k.Arm
}
