package scaleout

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"

	"rig/internal/metrics"
	"rig/receipts"
)

// A kept result leaves the activity as ErrResultPending with the result
// beside it: the worker's metrics count it by its receipt's outcome, not
// as a failed attempt.
func TestKeptResultIsCountedByItsOutcome(t *testing.T) {
	for _, c := range []struct {
		res  any
		err  error
		want string
	}{
		{TrialResult{Outcome: receipts.Scored}, activity.ErrResultPending, "scored"},
		{TrialResult{Outcome: receipts.Capped}, nil, "capped"},
		{TrialResult{}, errors.New("the runtime died"), metrics.OutcomeFailed},
	} {
		if got := attemptOutcome(c.res, c.err); got != c.want {
			t.Errorf("attemptOutcome(%v, %v) = %q, want %q", c.res, c.err, got, c.want)
		}
	}
}

// The worker gives a finished result up only on the engine's answer that
// it can never take it; the engine down, restarting or cut off is tried
// again (a result given up is a finished trial run twice).
func TestOnlyTheEnginesRefusalEndsTheKeeping(t *testing.T) {
	for _, c := range []struct {
		err     error
		refused bool
	}{
		{serviceerror.NewUnavailable("connection refused"), false},
		{serviceerror.NewDeadlineExceeded("context deadline exceeded"), false},
		{fmt.Errorf("complete: %w", context.DeadlineExceeded), false},
		{serviceerror.NewResourceExhausted(0, "busy"), false},
		{errors.New("error reading from server: EOF"), false},
		{serviceerror.NewInvalidArgument("bad token"), true},
		{serviceerror.NewPermissionDenied("no", ""), true},
	} {
		if got := engineRefused(c.err); got != c.refused {
			t.Errorf("engineRefused(%v) = %v, want %v", c.err, got, c.refused)
		}
	}
}
