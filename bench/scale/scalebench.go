// Package scale is `rig bench scale`: the scale-out engine timed on a
// private Temporal dev server. Synthetic plans run through the very
// workflows a study uses, with a coordinator and a trial activity of its
// own plugged in (scaleout.RegisterCoordinator,
// scaleout.RegisterTrialActivity), so the production workflows, coordinator
// and worker carry no bench-only switch; the fleet runs many real workers
// whose runtime is a timed sleep (scaleout.WorkerOptions.Launch) against
// the real coordinator and a study store of its own; the throughput run
// drives a real daemon and workers (the rig binary) through api on a copy
// of a design, cut to a few tasks, in a home of its own.
//
// It is for timing the engine: the overhead of handing a trial to a runner,
// the fan-out of a large plan against Temporal's history limits, and a
// study's throughput on 1 and N workers. It is not for measuring models or
// runtimes (rig bench runtimes), and it touches no study but the ones it
// makes for itself.
package scale

import (
	"context"
	"fmt"
	"gonum.org/v1/gonum/stat"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"rig/receipts"
	"rig/scaleout"
)

// Queue is the trial queue of the synthetic trials.
const Queue = "rig.bench.synthetic"

// coordinator is the synthetic coordinator: its plan is n numbered trials
// on Queue, and its merge takes every result as scored.
type coordinator struct {
	trials int
}

func (c *coordinator) Plan(_ context.Context, in scaleout.StudyInput) (scaleout.PlanInfo, error) {
	size := max(in.Chunk, 1)
	return scaleout.PlanInfo{Trials: c.trials, Chunks: (c.trials + size - 1) / size}, nil
}

func (c *coordinator) Chunk(_ context.Context, in scaleout.ChunkInput) ([]scaleout.PlannedTrial, error) {
	size := max(in.Chunk, 1)
	var out []scaleout.PlannedTrial
	for i := in.Index * size; i < min((in.Index+1)*size, c.trials); i++ {
		out = append(out, scaleout.PlannedTrial{Key: fmt.Sprintf("synthetic/scheduling/t%07d/1", i), Queue: Queue, Attempt: 1})
	}
	return out, nil
}

func (c *coordinator) Merge(_ context.Context, tr scaleout.TrialResult) (scaleout.MergeResult, error) {
	return scaleout.MergeResult{Outcome: tr.Outcome}, nil
}

func (c *coordinator) RecordLost(context.Context, scaleout.LostAttempt) (scaleout.MergeResult, error) {
	return scaleout.MergeResult{Outcome: receipts.Error}, nil
}

// CheckStop: a synthetic plan has no stopping rule, so it is never asked.
func (c *coordinator) CheckStop(context.Context, scaleout.StopCheck) (scaleout.StopResult, error) {
	return scaleout.StopResult{}, nil
}

// QueueServed: the bench serves its one queue itself.
func (c *coordinator) QueueServed(_ context.Context, q scaleout.QueueCheck) (scaleout.QueueState, error) {
	return scaleout.QueueState{Served: q.Queue == Queue}, nil
}

// Engine runs synthetic plans on a Temporal cluster: a coordinator queue
// and a trial queue of its own, served in this process.
type Engine struct {
	client client.Client
	queue  string
	coord  *coordinator
	ws     []worker.Worker

	mu    sync.Mutex
	waits []time.Duration
}

// Start dials the cluster at addr and starts the synthetic coordinator and
// trial workers. spool is a folder of the bench's own: nothing is written
// there, but a config names one.
func Start(ctx context.Context, addr, spool string) (*Engine, error) {
	cfg := scaleout.Config{Address: addr, Spool: spool}
	queue := "rig.bench.coordinator"
	cl, err := cfg.Dial(ctx, queue, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	e := &Engine{client: cl, queue: queue, coord: &coordinator{}}
	cw := worker.New(cl, queue, worker.Options{})
	scaleout.RegisterCoordinator(cw, e.coord)
	tw := worker.New(cl, Queue, worker.Options{MaxConcurrentActivityExecutionSize: 1000, MaxConcurrentActivityTaskPollers: 8, DisableWorkflowWorker: true})
	scaleout.RegisterTrialActivity(tw, e.trial)
	for _, w := range []worker.Worker{cw, tw} {
		if err := w.Start(); err != nil {
			e.Close()
			return nil, err
		}
		e.ws = append(e.ws, w)
	}
	return e, nil
}

// Close stops the workers and the client.
func (e *Engine) Close() {
	for _, w := range e.ws {
		w.Stop()
	}
	e.client.Close()
}

// trial is the synthetic trial: it runs nothing, and notes how long the
// engine took from scheduling it to handing it over.
func (e *Engine) trial(ctx context.Context, in scaleout.TrialInput) (scaleout.TrialResult, error) {
	wait := time.Since(activity.GetInfo(ctx).ScheduledTime)
	e.mu.Lock()
	e.waits = append(e.waits, wait)
	e.mu.Unlock()
	return scaleout.TrialResult{Key: in.Key, Attempt: in.Attempt, Worker: "bench", Outcome: receipts.Scored, Started: time.Now().UTC()}, nil
}

// Run runs a synthetic plan of n trials through the study workflow, inFlight
// at a time per chunk and atOnce chunks side by side, and returns how long
// it took and the workflow's result. Plans run one at a time.
func (e *Engine) Run(ctx context.Context, id string, n, inFlight, atOnce int) (time.Duration, scaleout.StudyResult, error) {
	e.coord.trials = n
	start := time.Now()
	wr, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: scaleout.WorkflowID("bench", id), TaskQueue: e.queue}, scaleout.StudyWorkflowName,
		scaleout.StudyInput{Study: "bench", Execution: id, Coordinator: e.queue, Chunk: scaleout.DefaultChunk, InFlight: inFlight, ChunksAtOnce: atOnce})
	if err != nil {
		return 0, scaleout.StudyResult{}, err
	}
	var res scaleout.StudyResult
	err = wr.Get(ctx, &res)
	return time.Since(start), res, err
}

// Waits returns, sorted, the engine's scheduling waits noted since the last
// call, and forgets them.
func (e *Engine) Waits() []time.Duration {
	e.mu.Lock()
	ws := e.waits
	e.waits = nil
	e.mu.Unlock()
	slices.Sort(ws)
	return ws
}

// Percentile is the p-th (0..1) of sorted durations by nearest rank
// (gonum's Empirical), as every other percentile rig prints.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	xs := make([]float64, len(sorted))
	for i, d := range sorted {
		xs[i] = float64(d)
	}
	return time.Duration(stat.Quantile(p, stat.Empirical, xs, nil))
}

// History is a workflow's history size.
type History struct{ Events, Bytes int64 }

// HistoryOf reads the history size of the bench's workflow id (with suffix,
// such as "/chunk-0", for a child).
func (e *Engine) HistoryOf(ctx context.Context, id, suffix string) (History, error) {
	wid := scaleout.WorkflowID("bench", id) + suffix
	d, err := e.client.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: "default", Execution: &commonpb.WorkflowExecution{WorkflowId: wid}})
	if err != nil {
		return History{}, fmt.Errorf("describing %s: %w", wid, err)
	}
	info := d.GetWorkflowExecutionInfo()
	return History{Events: info.GetHistoryLength(), Bytes: info.GetHistorySizeBytes()}, nil
}
