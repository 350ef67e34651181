package scaleout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"rig/receipts"
	"rig/run"
	"rig/studies"
)

// Handle follows one execution running through the engine, the way
// run.Handle follows a local one: progress read from the merged receipts,
// cancel through the engine, and the execution's status stored when the
// workflow ends.
type Handle struct {
	mu     sync.Mutex
	info   run.ExecInfo
	cancel context.CancelFunc
	done   chan struct{}
	c      *Coordinator
	id     string
	// stepping is set while the steps after the trials run on this host
	// (end), which Cancel then cancels itself: the workflow has ended, so
	// the engine has nothing to cancel. cancelAsked keeps a Cancel that
	// came between the workflow's end and the step's start.
	stepping, cancelAsked bool
	// since counts the trials done that finished after following began:
	// the rate is of those alone. Trials a restarted daemon merges in its
	// first seconds finished while it was down, and counted over those
	// seconds they made a rate of hundreds a minute.
	since int
}

// Info is the execution's progress now.
func (h *Handle) Info() run.ExecInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	info := h.info
	info.Workers = make(map[string]int, len(h.info.Workers))
	for w, n := range h.info.Workers {
		info.Workers[w] = n
	}
	return info
}

// Cancel asks the engine to cancel the workflow, or, once the workflow has
// ended, cancels the steps after the trials; the receipts merged stay.
func (h *Handle) Cancel() {
	h.mu.Lock()
	h.cancelAsked = true
	stepping := h.stepping
	h.mu.Unlock()
	if stepping {
		h.cancel()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.c.client.CancelWorkflow(ctx, h.id, ""); err != nil {
		h.c.log.Error("cancelling the workflow", "workflow", h.id, "err", err)
	}
}

// Done is closed once the workflow has ended and the status is stored.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Follow watches a submitted execution until its workflow ends. ended is
// told how it ended (studies.EventFinish or studies.EventCancel).
func (c *Coordinator) Follow(study string, e receipts.Execution, ended func(ctx context.Context, kind, why string)) (*Handle, error) {
	plan, _, _, st, err := c.planOf(study, e.ID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Handle{cancel: cancel, done: make(chan struct{}), c: c, id: WorkflowID(study, e.ID),
		info: run.ExecInfo{ID: e.ID, Parent: e.Parent, Attempt: e.Attempt, Status: string(receipts.Running), Engine: "temporal",
			StartedAt: time.Now().UTC(), Planned: len(plan.Trials), Records: c.studies.ExecDir(study, e.ID), Workers: map[string]int{}}}
	// The store is read once; from then on every receipt the coordinator
	// merges or records reaches the handle (note), so following costs no
	// reads however large the execution.
	rs, err := st.Receipts(ctx, e.ID)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, r := range rs {
		h.count(r)
	}
	c.follow(study, e.ID, h)
	resCh := make(chan error, 1)
	var res StudyResult
	go func() { resCh <- c.client.GetWorkflow(ctx, h.id, "").Get(ctx, &res) }()
	go func() {
		defer close(h.done)
		defer cancel()
		err := <-resCh
		c.unfollow(study, e.ID)
		h.end(ctx, st, study, e, res, err, ended)
	}()
	return h, nil
}

// end records how the followed workflow ended. A workflow that ran its
// trials (every one, or until the stopping rule settled) is followed by the
// steps on this host that read the merged outputs (Studies.AfterTrials: the
// fidelity step) before the execution's status is stored, as a local
// execution's are. A daemon that stops meanwhile (Close cancels ctx)
// stores nothing: the restarted daemon follows the ended workflow again
// and the step goes on where it stopped.
func (h *Handle) end(ctx context.Context, st *receipts.Store, study string, e receipts.Execution, res StudyResult, err error, ended func(ctx context.Context, kind, why string)) {
	if err != nil && h.c.closing.Load() {
		// The daemon is stopping, not the workflow: the execution goes
		// on on the workers, and the restarted daemon follows it again.
		h.c.log.Info("stopped following: the daemon is stopping; the execution goes on on the engine", "study", study, "execution", e.ID)
		return
	}
	// Every merged row is on disk before a step reads the records.
	h.c.CloseRecords(h.c.studies.ExecDir(study, e.ID))
	if err == nil {
		err = h.afterTrials(ctx, study, e)
		if err != nil && h.c.closing.Load() {
			h.c.log.Info("stopped the steps after the trials: the daemon is stopping; the restarted daemon finishes them", "study", study, "execution", e.ID, "err", err)
			return
		}
	}
	h.finish(st, study, e.ID, res, err, ended)
}

// afterTrials runs Studies.AfterTrials with its progress on the handle,
// cancellable by Cancel.
func (h *Handle) afterTrials(ctx context.Context, study string, e receipts.Execution) error {
	h.mu.Lock()
	h.stepping = true
	asked := h.cancelAsked
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.stepping, h.info.Current = false, ""
		h.mu.Unlock()
	}()
	if asked {
		return context.Canceled
	}
	return h.c.studies.AfterTrials(ctx, study, e, func(what string) {
		h.mu.Lock()
		h.info.Current = what
		h.mu.Unlock()
	})
}

// count adds one stored receipt to the progress; h.mu is held or h is not
// shared yet.
func (h *Handle) count(r receipts.Receipt) {
	switch {
	case r.Outcome.Counted():
		h.info.Done++
	case r.Outcome == receipts.Preempted:
		h.info.Preempted++
	case r.Outcome == receipts.Error:
		h.info.Failed++
		h.info.Done++
	}
	if w := r.Pins["worker"]; w != "" {
		h.info.Workers[w]++
	}
}

// note is a receipt the coordinator just stored for this execution.
func (h *Handle) note(r receipts.Receipt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	done := h.info.Done
	h.count(r)
	h.info.Current = r.Trial().String()
	if h.info.Done > done && !r.FinishedAt.Before(h.info.StartedAt) {
		h.since++
	}
	if n := h.since; n > 0 {
		el := time.Since(h.info.StartedAt)
		h.info.RatePerMin = float64(n) / el.Minutes()
		left := h.info.Planned - h.info.Done
		h.info.ETA = time.Duration(float64(el) / float64(n) * float64(left)).Round(time.Second).String()
	}
}

func (h *Handle) finish(st *receipts.Store, study, exec string, res StudyResult, err error, ended func(ctx context.Context, kind, why string)) {
	ctx := context.Background()
	status, kind, why := receipts.Done, studies.EventFinish, fmt.Sprintf("all planned trials have a counted receipt (through temporal, %d workers)", len(res.Workers))
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &canceled) || temporal.IsCanceledError(err) || errors.Is(err, context.Canceled):
		status, kind, why = receipts.Cancelled, studies.EventCancel, "cancelled"
	case err != nil:
		status, kind, why = receipts.Failed, studies.EventCancel, "failed: "+err.Error()
	case res.Errors > 0:
		why = fmt.Sprintf("every planned trial ran; %d ended in error and are not scored (the report names them; rig study rerun %s retries them)", res.Errors, study)
	}
	if err == nil {
		// As the local runner ends: the stopping rule's last look, and a
		// settled one ends the execution stopped_early.
		seq, ok := storedStop(ctx, st, exec)
		switch {
		case res.Stopped && ok:
			status, why = receipts.StoppedEarly, run.DescribeStop(seq)
		case res.Stopped:
			status, why = receipts.StoppedEarly, fmt.Sprintf("stopped early: the stopping rule settled every monitored comparison (%d planned trials not run)", res.NotRun)
		case ok:
			why += "; " + run.DescribeStop(seq)
		}
	}
	if e := st.SetExecutionStatus(ctx, exec, receipts.Running, status, "rig daemon", why); e != nil {
		h.c.log.Error("recording execution status", "err", e)
	}
	if ended != nil {
		ended(ctx, kind, why)
	}
	h.mu.Lock()
	h.info.Status, h.info.Current = string(status), ""
	if err != nil {
		h.info.Error = err.Error()
	}
	h.mu.Unlock()
	h.c.log.Info("execution ended", "study", study, "execution", exec, "status", status, "engine", "temporal", "workers", res.Workers, "err", err)
}
