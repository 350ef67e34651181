package scaleout

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"rig/internal/metrics"
)

// activityMetrics records the engine's activities into a metrics.Set: on a
// worker each trial attempt (its queue, its outcome, how long it took), on
// the coordinator each merge (how long, how it ended). It is set on the
// Temporal client (Config.Dial), and the SDK hands a client's interceptors
// to every worker made from it, so the worker and the coordinator record
// without a line in their activities.
type activityMetrics struct {
	interceptor.InterceptorBase
	m *metrics.Set
}

func (a *activityMetrics) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityRecorder{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, m: a.m}
}

type activityRecorder struct {
	interceptor.ActivityInboundInterceptorBase
	m *metrics.Set
}

func (r *activityRecorder) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	switch info.ActivityType.Name {
	case actRunTrial:
		r.m.TrialStarted(info.TaskQueue)
		start := time.Now()
		res, err := r.Next.ExecuteActivity(ctx, in)
		r.m.AttemptFinished(attemptOutcome(res, err), time.Since(start).Seconds())
		return res, err
	case actMerge:
		start := time.Now()
		res, err := r.Next.ExecuteActivity(ctx, in)
		r.m.MergeObserved(mergeResult(res, err), time.Since(start).Seconds())
		return res, err
	}
	return r.Next.ExecuteActivity(ctx, in)
}

// attemptOutcome is the label of a trial activity's end: its receipt's
// outcome, or refused or failed when it wrote none.
func attemptOutcome(res any, err error) string {
	if errors.Is(err, activity.ErrResultPending) {
		err = nil // a finished trial whose result the worker sends itself (outbox.go)
	}
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrRefused {
			return metrics.OutcomeRefused
		}
		return metrics.OutcomeFailed
	}
	switch t := res.(type) {
	case TrialResult:
		if t.Outcome != "" {
			return string(t.Outcome)
		}
	case *TrialResult:
		if t != nil && t.Outcome != "" {
			return string(t.Outcome)
		}
	}
	return metrics.OutcomeFailed
}

// mergeResult is the label of a merge's end: merged, already (the same
// receipt again), divergent (kept apart), refused (the entry does not match
// what the worker reported, or the plan) or failed (to be retried).
func mergeResult(res any, err error) string {
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && (app.Type() == ErrMismatch || app.Type() == ErrSpool) {
			return metrics.MergeRefused
		}
		return metrics.MergeFailed
	}
	m, ok := res.(MergeResult)
	if p, isPtr := res.(*MergeResult); isPtr && p != nil {
		m, ok = *p, true
	}
	switch {
	case !ok:
		return metrics.MergeFailed
	case m.Already:
		return metrics.MergeAlready
	case m.Divergent:
		return metrics.MergeDivergent
	}
	return metrics.MergeMerged
}
