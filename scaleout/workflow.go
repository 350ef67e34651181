package scaleout

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// WorkflowID is the id of one execution's workflow: the idempotency key of
// a submit.
func WorkflowID(study, execution string) string { return "rig/" + study + "/" + execution }

// Limits on the attempts of one trial inside a workflow: beyond them the
// trial ends in an error receipt instead of looping forever.
const (
	maxLostAttempts = 5
	maxRefusals     = 120 // at refusalWait apart: ten minutes without a worker that serves the queue
	refusalWait     = 5 * time.Second
)

func coordinatorOptions(ctx workflow.Context, queue string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{ErrMismatch}},
	})
}

// StudyWorkflow runs one execution: it asks the coordinator to lay out the
// plan, then runs the plan's chunks as child workflows, ChunksAtOnce at a
// time, in plan order.
func StudyWorkflow(ctx workflow.Context, in StudyInput) (StudyResult, error) {
	cctx := coordinatorOptions(ctx, in.Coordinator)
	var info PlanInfo
	if err := workflow.ExecuteActivity(cctx, actPlan, in).Get(ctx, &info); err != nil {
		return StudyResult{}, err
	}
	total := StudyResult{Trials: info.Trials, Workers: map[string]int{}}
	at := max(in.ChunksAtOnce, 1)
	var pending []workflow.ChildWorkflowFuture
	wait := func(f workflow.ChildWorkflowFuture) error {
		var r StudyResult
		if err := f.Get(ctx, &r); err != nil {
			return err
		}
		total.Counted += r.Counted
		total.Errors += r.Errors
		total.Retried += r.Retried
		for w, n := range r.Workers {
			total.Workers[w] += n
		}
		return nil
	}
	for i := range info.Chunks {
		if len(pending) == at {
			if err := wait(pending[0]); err != nil {
				return total, err
			}
			pending = pending[1:]
		}
		cw := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: fmt.Sprintf("%s/chunk-%d", WorkflowID(in.Study, in.Execution), i),
		})
		pending = append(pending, workflow.ExecuteChildWorkflow(cw, ChunkWorkflowName, ChunkInput{StudyInput: in, Index: i}))
	}
	for _, f := range pending {
		if err := wait(f); err != nil {
			return total, err
		}
	}
	return total, nil
}

// ChunkWorkflow runs one chunk's trials, InFlight at a time in plan order.
func ChunkWorkflow(ctx workflow.Context, in ChunkInput) (StudyResult, error) {
	cctx := coordinatorOptions(ctx, in.Coordinator)
	var trials []PlannedTrial
	if err := workflow.ExecuteActivity(cctx, actChunk, in).Get(ctx, &trials); err != nil {
		return StudyResult{}, err
	}
	res := StudyResult{Trials: len(trials), Workers: map[string]int{}}
	sem := workflow.NewSemaphore(ctx, int64(max(in.InFlight, 1)))
	wg := workflow.NewWaitGroup(ctx)
	var firstErr error
	for _, t := range trials {
		if t.Done {
			res.Counted++
			continue
		}
		if err := sem.Acquire(ctx, 1); err != nil {
			return res, err
		}
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			defer sem.Release(1)
			r, err := runTrial(ctx, in.StudyInput, t)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			res.Counted += r.Counted
			res.Errors += r.Errors
			res.Retried += r.Retried
			for w, n := range r.Workers {
				res.Workers[w] += n
			}
		})
	}
	wg.Wait(ctx)
	return res, firstErr
}

// runTrial runs one trial to a counted receipt or an error receipt: a
// preempted or lost attempt is rerun as the next attempt with its parent; a
// refusal hands the same attempt to another worker of the queue.
func runTrial(ctx workflow.Context, in StudyInput, t PlannedTrial) (StudyResult, error) {
	res := StudyResult{Workers: map[string]int{}}
	cctx := coordinatorOptions(ctx, in.Coordinator)
	mctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           in.Coordinator,
		StartToCloseTimeout: 10 * time.Minute,
		// A spool entry that is still incomplete after these tries was cut
		// off: the attempt is lost and rerun.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			MaximumAttempts: 6, NonRetryableErrorTypes: []string{ErrMismatch}},
	})
	attempt, parent := t.Attempt, t.Parent
	refusals, lost := 0, 0
	act := actRunTrial
	if in.NoModel {
		act = ActNoModel
	}
	for {
		wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: t.Queue,
			// A trial's own caps bound it; this only catches a worker that
			// keeps heartbeating on a trial that never ends.
			StartToCloseTimeout: 24 * time.Hour,
			// A killed or cut-off worker stops heartbeating: the engine
			// notices within this, and the attempt is rerun elsewhere.
			HeartbeatTimeout: 20 * time.Second,
			// rig, not the engine, decides what a failed attempt means.
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		ti := TrialInput{Study: in.Study, Execution: in.Execution, DesignHash: in.DesignHash, Key: t.Key, Attempt: attempt, Parent: parent,
			Queue: t.Queue, Runtime: t.Runtime, BinarySHA256: t.BinarySHA256, ModelSHA256: t.ModelSHA256}
		var tr TrialResult
		err := workflow.ExecuteActivity(wctx, act, ti).Get(ctx, &tr)
		var appErr *temporal.ApplicationError
		switch {
		case err != nil && temporal.IsCanceledError(err):
			return res, err
		case err != nil && errors.As(err, &appErr) && appErr.Type() == ErrRefused && refusals < maxRefusals:
			refusals++
			if err := workflow.Sleep(ctx, refusalWait); err != nil {
				return res, err
			}
			continue
		case err != nil && errors.As(err, &appErr) && (appErr.Type() == ErrMismatch || appErr.Type() == ErrRefused):
			// The stack cannot be the frozen one, or no worker would take
			// it: an error receipt, never a silent gap.
			if err := workflow.ExecuteActivity(cctx, actRecordLost, LostAttempt{Study: in.Study, Execution: in.Execution, Key: t.Key,
				Attempt: attempt, Parent: parent, Why: "refused: " + appErr.Error(), Final: true}).Get(ctx, nil); err != nil {
				return res, err
			}
			res.Errors++
			return res, nil
		case err != nil:
			// The worker died, was cut off or failed before it recorded
			// anything: the attempt is lost, and the next one reruns it
			// (unless it had finished and only its result was lost).
			lost++
			final := lost >= maxLostAttempts
			var m MergeResult
			if err := workflow.ExecuteActivity(cctx, actRecordLost, LostAttempt{Study: in.Study, Execution: in.Execution, Key: t.Key,
				Attempt: attempt, Parent: parent, Why: err.Error(), Final: final}).Get(ctx, &m); err != nil {
				return res, err
			}
			switch {
			case m.Outcome == "error":
				res.Errors++
				return res, nil
			case m.Outcome != "preempted" && m.Outcome != "":
				res.Counted++
				return res, nil
			}
			res.Retried++
			parent, attempt = attempt, attempt+1
			continue
		}
		if in.NoModel {
			res.Counted++
			res.Workers[tr.Worker]++
			return res, nil
		}
		var m MergeResult
		if err := workflow.ExecuteActivity(mctx, actMerge, tr).Get(ctx, &m); err != nil {
			if temporal.IsCanceledError(err) {
				return res, err
			}
			lost++
			if err := workflow.ExecuteActivity(cctx, actRecordLost, LostAttempt{Study: in.Study, Execution: in.Execution, Key: t.Key,
				Attempt: attempt, Parent: parent, Why: "its spool entry could not be brought in: " + err.Error(), Final: lost >= maxLostAttempts}).Get(ctx, nil); err != nil {
				return res, err
			}
			if lost >= maxLostAttempts {
				res.Errors++
				return res, nil
			}
			res.Retried++
			parent, attempt = attempt, attempt+1
			continue
		}
		res.Workers[tr.Worker]++
		switch m.Outcome {
		case "preempted":
			res.Retried++
			parent, attempt = attempt, attempt+1
			continue
		case "error":
			res.Errors++
		default:
			res.Counted++
		}
		return res, nil
	}
}
