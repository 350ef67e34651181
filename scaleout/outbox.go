package scaleout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
)

// A worker that finished a trial keeps its result until the engine takes
// it. The SDK sends an activity's result once, within its RPC timeout
// (10 s), and drops it on failure: a trial that finished while the engine
// was down was then lost, although its whole entry sat in the spool, and
// rerun. So the trial activity completes itself (activity.ErrResultPending
// and Client.CompleteActivity), retrying until the engine answers:
//
//   - the engine is back before the attempt's heartbeat timeout passed on
//     its clock: the completion goes through, and the trial is merged as
//     any other;
//   - it is back after (any outage longer than the heartbeat timeout, less
//     the time since the last beat got through): the engine has closed the
//     attempt as timed out and answers NotFound. The worker then reports
//     the result again, as a ReportWorkflow on the coordinator's queue
//     that runs the same merge, and the coordinator, recording the attempt
//     lost, waits for that report when it finds the worker's whole entry in
//     the spool (Coordinator.RecordLost, lostReportWait).
//
// A result is kept for as long as its attempt may run (the trial
// activity's StartToClose, 24 h) and the worker runs; a worker stopped
// with a result still kept says so in its log, and that attempt is rerun.

// ReportWorkflowName is the workflow a worker starts to report a finished
// trial whose activity the engine closed before it could take the result.
const ReportWorkflowName = "rig.report"

// ReportWorkflowID is the report's workflow id: under the execution's, so
// the merge's caller check holds it to the study and execution it names,
// and one per spool entry, so a report sent twice is the same one.
func ReportWorkflowID(tr TrialResult) string {
	return WorkflowID(tr.Study, tr.Execution) + "/report/" + tr.Entry
}

// ReportWorkflow merges a finished trial's entry the worker reported after
// the engine had closed its attempt: the merge the trial's workflow would
// have run, on the coordinator's queue (the report's own), with its checks
// and its exactly-once rule. The trial's workflow sees the merged receipt
// when it records the attempt lost.
func ReportWorkflow(ctx workflow.Context, tr TrialResult) (MergeResult, error) {
	var m MergeResult
	err := workflow.ExecuteActivity(mergeOptions(ctx, workflow.GetInfo(ctx).TaskQueueName), actMerge, tr).Get(ctx, &m)
	return m, err
}

// Bounds of a kept result.
const (
	// keepResult is the longest a result is kept: the trial activity's
	// StartToClose, past which the engine has closed the attempt anyway.
	keepResult = 24 * time.Hour
	// deliverTry bounds one call to the engine; deliverRetry is the
	// longest wait between two.
	deliverTry   = 10 * time.Second
	deliverRetry = 5 * time.Second
	// reportWindow bounds a report workflow: it only runs one merge.
	reportWindow = time.Hour
)

// outbox holds a worker's finished results until the engine takes them.
type outbox struct {
	cl     client.Client
	worker string
	log    *slog.Logger
	life   context.Context // the worker's: a result is kept no longer
	stop   context.CancelFunc
	mu     sync.Mutex // closed, and wg.Add: none after close has begun
	closed bool
	wg     sync.WaitGroup
}

func newOutbox(cl client.Client, worker string, log *slog.Logger) *outbox {
	life, stop := context.WithCancel(context.Background())
	return &outbox{cl: cl, worker: worker, log: log, life: life, stop: stop}
}

// kept is one finished result and where it goes.
type kept struct {
	token []byte
	run   workflow.Execution // the trial's workflow (its chunk)
	res   TrialResult
	until time.Time
}

// trialActivity is run as the trial activity, its result kept by o: a
// result goes to the engine through o, never through the SDK's one try.
// Errors (refusals, failures) still go the SDK's way: nothing finished.
func (o *outbox) trialActivity(run func(context.Context, TrialInput) (TrialResult, error)) func(context.Context, TrialInput) (TrialResult, error) {
	return func(ctx context.Context, in TrialInput) (TrialResult, error) {
		res, err := run(ctx, in)
		if err != nil || !activity.IsActivity(ctx) {
			return res, err
		}
		info := activity.GetInfo(ctx)
		k := kept{token: info.TaskToken, run: workflow.Execution{ID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID},
			res: res, until: info.StartedTime.Add(keepResult)}
		o.mu.Lock()
		if o.closed {
			// The worker is stopping: sent from here, while its client is open.
			o.mu.Unlock()
			o.deliver(k)
			return res, activity.ErrResultPending
		}
		o.wg.Add(1)
		o.mu.Unlock()
		go func() { defer o.wg.Done(); o.deliver(k) }()
		// The result travels with the error for the interceptors (the
		// worker's metrics read its outcome); the SDK sends neither.
		return res, activity.ErrResultPending
	}
}

// close ends the keeping when the worker stops: results not yet taken get
// up to grace, then are given up, each named in the log.
func (o *outbox) close(grace time.Duration) {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
	o.stop()
	o.wg.Wait()
}

// deliver completes the attempt with k's result, retrying while the engine
// cannot be reached; once the engine says the attempt is closed, the
// result is reported instead.
func (o *outbox) deliver(k kept) {
	wait := 500 * time.Millisecond
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), deliverTry)
		err := o.cl.CompleteActivity(ctx, k.token, k.res, nil)
		cancel()
		var gone *serviceerror.NotFound
		switch {
		case err == nil:
			if try > 1 {
				o.log.Info("the engine took a finished trial's result", "worker", o.worker, "trial", k.res.Key, "attempt", k.res.Attempt, "tries", try)
			}
			return
		case errors.As(err, &gone):
			o.report(k)
			return
		case engineRefused(err):
			o.log.Error("the engine refused a finished trial's result: the attempt will be recorded lost and rerun", "worker", o.worker,
				"trial", k.res.Key, "attempt", k.res.Attempt, "entry", k.res.Entry, "err", err)
			return
		case try == 1:
			o.log.Warn("the engine did not take a finished trial's result: kept, and sent again until it does", "worker", o.worker,
				"trial", k.res.Key, "attempt", k.res.Attempt, "err", err)
		}
		if !o.pause(k, wait) {
			return
		}
		wait = min(2*wait, deliverRetry)
	}
}

// report starts the ReportWorkflow of k's result on the coordinator's queue
// (the trial workflow's own), retrying while the engine cannot be reached.
func (o *outbox) report(k kept) {
	wait := 500 * time.Millisecond
	for {
		err := o.startReport(k)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		var gone *serviceerror.NotFound
		switch {
		case err == nil || errors.As(err, &started):
			o.log.Info("the engine had closed a finished trial's attempt (it was down past the heartbeat timeout): its result is reported again, to be merged, not rerun",
				"worker", o.worker, "trial", k.res.Key, "attempt", k.res.Attempt, "entry", k.res.Entry)
			return
		case errors.As(err, &gone):
			o.log.Warn("a finished trial's workflow is gone (the run ended or was cancelled): its result is not reported", "worker", o.worker,
				"trial", k.res.Key, "attempt", k.res.Attempt, "workflow", k.run.ID)
			return
		case engineRefused(err):
			o.log.Error("reporting a finished trial failed: the attempt will be rerun", "worker", o.worker, "trial", k.res.Key, "attempt", k.res.Attempt, "err", err)
			return
		}
		if !o.pause(k, wait) {
			return
		}
		wait = min(2*wait, deliverRetry)
	}
}

func (o *outbox) startReport(k kept) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*deliverTry)
	defer cancel()
	d, err := o.cl.DescribeWorkflow(ctx, k.run.ID, k.run.RunID)
	if err != nil {
		return err
	}
	queue := d.RawResponse.GetExecutionConfig().GetTaskQueue().GetName()
	if queue == "" {
		return fmt.Errorf("workflow %s names no task queue", k.run.ID)
	}
	_, err = o.cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ReportWorkflowID(k.res), TaskQueue: queue,
		WorkflowExecutionTimeout: reportWindow,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, ReportWorkflowName, k.res)
	return err
}

// pause waits d before the next try, and says false when the result is no
// longer kept: the worker stops, or the attempt's bound has passed.
func (o *outbox) pause(k kept, d time.Duration) bool {
	if time.Now().After(k.until) {
		o.log.Error("a finished trial's result was kept as long as its attempt may run and the engine never took it: the attempt is rerun",
			"worker", o.worker, "trial", k.res.Key, "attempt", k.res.Attempt, "entry", k.res.Entry)
		return false
	}
	select {
	case <-o.life.Done():
		o.log.Error("the worker stops with a finished trial's result the engine has not taken: the attempt will be recorded lost and rerun",
			"worker", o.worker, "trial", k.res.Key, "attempt", k.res.Attempt, "entry", k.res.Entry)
		return false
	case <-time.After(d):
		return true
	}
}

// engineRefused says err is the engine's answer that the call can never
// succeed (a bad request, no such namespace, no permission), not the
// engine down, restarting, overloaded or cut off: anything else is worth
// another try, since giving up reruns a finished trial.
func engineRefused(err error) bool {
	var (
		invalid   *serviceerror.InvalidArgument
		denied    *serviceerror.PermissionDenied
		namespace *serviceerror.NamespaceNotFound
		failed    *serviceerror.FailedPrecondition
		unimpl    *serviceerror.Unimplemented
	)
	return errors.As(err, &invalid) || errors.As(err, &denied) || errors.As(err, &namespace) || errors.As(err, &failed) || errors.As(err, &unimpl)
}
