package scaleout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"rig/receipts"
	"rig/run"
	"rig/studies"
	"rig/studies/studytest"
)

// An engine execution whose workflow has run its trials ends as a local one
// does: the steps after the trials (the fidelity step, faked here) run on
// the daemon's host while the execution is still running, with their
// progress on the follower, before its status is stored. A step that fails
// fails the execution, naming why; a workflow that failed has no step; a
// Cancel during the step cancels it (the workflow has ended: there is
// nothing left on the engine to cancel); and a daemon that stops during the
// step stores nothing, so the restarted daemon finishes it.
func TestEngineExecutionEndsAfterItsStepsOnThisHost(t *testing.T) {
	cases := []struct {
		name        string
		workflowErr error
		closing     bool
		step        func(ctx context.Context, started chan<- struct{}) error
		cancel      bool // Cancel once the step has started
		wantStep    bool
		wantStatus  receipts.Status
		wantKind    string // "" when ended must not be told
		wantWhy     string
	}{
		{name: "done after the step", step: func(context.Context, chan<- struct{}) error { return nil },
			wantStep: true, wantStatus: receipts.Done, wantKind: studies.EventFinish, wantWhy: "all planned trials"},
		{name: "the step fails", step: func(context.Context, chan<- struct{}) error {
			return errors.New("fidelity of job kind qa to ref: arm b: the scorer died")
		}, wantStep: true, wantStatus: receipts.Failed, wantKind: studies.EventCancel, wantWhy: "failed: fidelity of job kind qa to ref: arm b: the scorer died"},
		{name: "the workflow failed", workflowErr: errors.New("activity Plan failed"), step: func(context.Context, chan<- struct{}) error { return nil },
			wantStatus: receipts.Failed, wantKind: studies.EventCancel, wantWhy: "failed: activity Plan failed"},
		{name: "cancelled during the step", cancel: true, step: func(ctx context.Context, started chan<- struct{}) error {
			close(started)
			<-ctx.Done()
			return fmt.Errorf("fidelity: %w", ctx.Err())
		}, wantStep: true, wantStatus: receipts.Cancelled, wantKind: studies.EventCancel, wantWhy: "cancelled"},
		{name: "the daemon stops during the step", closing: true, step: func(ctx context.Context, _ chan<- struct{}) error {
			return fmt.Errorf("fidelity: %w", context.Canceled)
		}, wantStep: true, wantStatus: receipts.Running},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, f, _ := mergeFixture(t)
			ctx := context.Background()
			exec := receipts.Execution{ID: fmt.Sprintf("exec-%d", i+3), Attempt: 1, Status: receipts.Running, DesignHash: studytest.ExecutionHash}
			if err := f.st.PutExecution(ctx, exec); err != nil {
				t.Fatal(err)
			}
			stepCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			h := &Handle{cancel: cancel, done: make(chan struct{}), c: c, id: WorkflowID("s1", exec.ID),
				info: run.ExecInfo{ID: exec.ID, Status: string(receipts.Running), Workers: map[string]int{}}}
			started := make(chan struct{})
			if tc.cancel {
				go func() {
					<-started
					h.Cancel()
				}()
			}
			stepped := false
			f.after = func(ctx context.Context, e receipts.Execution, say func(string)) error {
				stepped = true
				got, err := f.st.Execution(ctx, e.ID)
				if err != nil || got.Status != receipts.Running {
					t.Errorf("during the step the execution is %s (%v); want it still running", got.Status, err)
				}
				say("fidelity: b held to ref on qa (2 tasks)")
				if cur := h.Info().Current; cur != "fidelity: b held to ref on qa (2 tasks)" {
					t.Errorf("the follower shows %q during the step; want the step's progress", cur)
				}
				return tc.step(ctx, started)
			}
			c.studies = f
			c.closing.Store(tc.closing)
			kind, why := "", ""
			h.end(stepCtx, f.st, "s1", exec, StudyResult{}, tc.workflowErr, func(_ context.Context, k, w string) { kind, why = k, w })

			if stepped != tc.wantStep {
				t.Errorf("the step ran: %v; want %v", stepped, tc.wantStep)
			}
			got, err := f.st.Execution(ctx, exec.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.wantStatus {
				t.Errorf("the execution ended %s; want %s", got.Status, tc.wantStatus)
			}
			if kind != tc.wantKind || !strings.HasPrefix(why, tc.wantWhy) {
				t.Errorf("ended was told %q %q; want %q, why starting %q", kind, why, tc.wantKind, tc.wantWhy)
			}
			if tc.wantStatus != receipts.Running && h.Info().Current != "" {
				t.Errorf("after its end the follower still shows %q", h.Info().Current)
			}
		})
	}
}
