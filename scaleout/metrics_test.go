package scaleout

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"rig/internal/metrics"
	"rig/receipts"
)

// TestEngineActivitiesAreCounted runs trial and merge activities through the
// real dev server on a client dialled with Config.Metrics, and scrapes the
// Set on loopback: the interceptor the client carries reaches the worker's
// activities without a line in them. The activities are fakes (their work
// is not what is tested); the engine, the SDK and the endpoint are real.
func TestEngineActivitiesAreCounted(t *testing.T) {
	s := startDevServer(t)
	m := metrics.New()
	cfg := Config{Address: s.Address(), Spool: t.TempDir(), Metrics: m}
	cl, err := cfg.Dial(context.Background(), "metrics-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const queue = "rig.test.metrics"
	w := worker.New(cl, queue, worker.Options{})
	outcomes := map[string]error{"scored": nil, "capped": nil, "refused": refuse("fake: refused"), "failed": errors.New("fake: the runtime died")}
	w.RegisterActivityWithOptions(func(ctx context.Context, in TrialInput) (TrialResult, error) {
		time.Sleep(50 * time.Millisecond)
		if err := outcomes[in.Key]; err != nil {
			return TrialResult{}, err
		}
		return TrialResult{Key: in.Key, Outcome: receipts.Outcome(in.Key)}, nil
	}, activity.RegisterOptions{Name: actRunTrial})
	w.RegisterActivityWithOptions(func(ctx context.Context, tr TrialResult) (MergeResult, error) {
		return MergeResult{Outcome: receipts.Scored, Already: tr.Key == "again"}, nil
	}, activity.RegisterOptions{Name: actMerge})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		for _, k := range []string{"scored", "capped", "refused", "failed"} {
			_ = workflow.ExecuteActivity(ctx, actRunTrial, TrialInput{Key: k}).Get(ctx, nil)
		}
		for _, k := range []string{"first", "again"} {
			if err := workflow.ExecuteActivity(ctx, actMerge, TrialResult{Key: k}).Get(ctx, nil); err != nil {
				return err
			}
		}
		return nil
	}, workflow.RegisterOptions{Name: "rig.test.metrics-workflow"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "metrics-test", TaskQueue: queue}, "rig.test.metrics-workflow")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	addr, err := m.Start(ctx, "127.0.0.1:0", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	fams, err := metrics.Scrape(ctx, "http://"+addr.String()+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"rig_trials_started_total", map[string]string{"queue": queue}, 4},
		{"rig_trials_in_flight", nil, 0},
		{"rig_trials_total", map[string]string{"outcome": "scored"}, 1},
		{"rig_trials_total", map[string]string{"outcome": "capped"}, 1},
		{"rig_trials_total", map[string]string{"outcome": metrics.OutcomeRefused}, 1},
		{"rig_trials_total", map[string]string{"outcome": metrics.OutcomeFailed}, 1},
		{"rig_trial_attempt_duration_seconds", map[string]string{"outcome": "scored"}, 1},
		{"rig_merge_duration_seconds", map[string]string{"result": "merged"}, 1},
		{"rig_merge_duration_seconds", map[string]string{"result": "already"}, 1},
	} {
		if got, ok := metrics.Value(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}
