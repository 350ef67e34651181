package scaleout

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"rig/internal/metrics"
	"rig/receipts"
)

// TestEngineActivitiesAreCounted runs trial activities on a worker's client
// and merge activities on the coordinator's, each dialled with
// Config.Metrics and its own Set (a worker's, the daemon's), through the
// real dev server, and scrapes each Set on loopback: the interceptor the
// client carries reaches the activities without a line in them, and each
// process exports what it ran. The activities are fakes (their work is not
// what is tested); the engine, the SDK and the endpoint are real.
func TestEngineActivitiesAreCounted(t *testing.T) {
	s := startDevServer(t)
	mw := metrics.New(metrics.Worker, metrics.Known{Outcomes: []string{"scored", "capped"}})
	md := metrics.New(metrics.Daemon, metrics.Known{})
	dial := func(m *metrics.Set, id string) client.Client {
		cfg := Config{Address: s.Address(), Spool: t.TempDir(), Metrics: m}
		cl, err := cfg.Dial(context.Background(), id, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	const queue, coordQueue = "rig.test.metrics", "rig.test.metrics-coordinator"
	w := worker.New(dial(mw, "metrics-test-worker"), queue, worker.Options{})
	outcomes := map[string]error{"scored": nil, "capped": nil, "refused": refuse("fake: refused"), "failed": errors.New("fake: the runtime died")}
	w.RegisterActivityWithOptions(func(ctx context.Context, in TrialInput) (TrialResult, error) {
		time.Sleep(50 * time.Millisecond)
		if err := outcomes[in.Key]; err != nil {
			return TrialResult{}, err
		}
		return TrialResult{Key: in.Key, Outcome: receipts.Outcome(in.Key)}, nil
	}, activity.RegisterOptions{Name: actRunTrial})
	cl := dial(md, "metrics-test-coordinator")
	coord := worker.New(cl, coordQueue, worker.Options{})
	coord.RegisterActivityWithOptions(func(ctx context.Context, tr TrialResult) (MergeResult, error) {
		return MergeResult{Outcome: receipts.Scored, Already: tr.Key == "again"}, nil
	}, activity.RegisterOptions{Name: actMerge})
	coord.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		tctx := workflow.WithTaskQueue(ctx, queue)
		for _, k := range []string{"scored", "capped", "refused", "failed"} {
			_ = workflow.ExecuteActivity(tctx, actRunTrial, TrialInput{Key: k}).Get(ctx, nil)
		}
		for _, k := range []string{"first", "again"} {
			if err := workflow.ExecuteActivity(ctx, actMerge, TrialResult{Key: k}).Get(ctx, nil); err != nil {
				return err
			}
		}
		return nil
	}, workflow.RegisterOptions{Name: "rig.test.metrics-workflow"})
	for _, w := range []worker.Worker{w, coord} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "metrics-test", TaskQueue: coordQueue}, "rig.test.metrics-workflow")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	scraped := map[*metrics.Set]map[string]*dto.MetricFamily{}
	for _, m := range []*metrics.Set{mw, md} {
		addr, err := m.Start(ctx, "127.0.0.1:0", false, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if scraped[m], err = metrics.Scrape(ctx, "http://"+addr.String()+"/metrics"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		set    *metrics.Set
		name   string
		labels map[string]string
		want   float64
	}{
		{mw, "rig_trials_started_total", map[string]string{"task_queue": queue}, 4},
		{mw, "rig_trials_in_flight", nil, 0},
		{mw, "rig_trial_attempts_total", map[string]string{"outcome": "scored"}, 1},
		{mw, "rig_trial_attempts_total", map[string]string{"outcome": "capped"}, 1},
		{mw, "rig_trial_attempts_total", map[string]string{"outcome": metrics.OutcomeRefused}, 1},
		{mw, "rig_trial_attempts_total", map[string]string{"outcome": metrics.OutcomeFailed}, 1},
		{mw, "rig_trial_attempt_duration_seconds", map[string]string{"outcome": "scored"}, 1},
		{md, "rig_merge_duration_seconds", map[string]string{"result": metrics.MergeMerged}, 1},
		{md, "rig_merge_duration_seconds", map[string]string{"result": metrics.MergeAlready}, 1},
		{md, "rig_merge_duration_seconds", map[string]string{"result": metrics.MergeDivergent}, 0},
	} {
		if got, ok := metrics.Value(scraped[c.set], c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}
