package scaleout

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"rig/receipts"
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
		// The coordinator's activities heartbeat (beat): one left on a
		// daemon that died is retried on the restarted one within this.
		HeartbeatTimeout: coordinatorHeartbeatTimeout,
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
	if info.Stopping && workflow.GetVersion(ctx, versionStopping, workflow.DefaultVersion, 1) >= 1 {
		return studyByBlocks(ctx, in, info)
	}
	total := StudyResult{Trials: info.Trials, Workers: map[string]int{}}
	at := max(in.ChunksAtOnce, 1)
	shared := workflow.GetVersion(ctx, versionSharedInFlight, workflow.DefaultVersion, 1) >= 1 && in.InFlight > 0
	if shared {
		// The chunks side by side share the queue's limit: any `at`
		// consecutive chunks start with InFlight in all, so a queue never
		// has more trials scheduled than its workers were said to take.
		// The last chunk left running is given the whole limit back.
		at = min(at, in.InFlight, max(info.Chunks, 1))
	}
	share := func(i int) int {
		n := in.InFlight / at
		if i%at < in.InFlight%at {
			n++
		}
		return n
	}
	if shared && at > 1 && workflow.GetVersion(ctx, versionReshare, workflow.DefaultVersion, 1) >= 1 {
		return total, chunksSharing(ctx, in, info.Chunks, at, &total)
	}
	var pending []workflow.ChildWorkflowFuture
	wait := func(f workflow.ChildWorkflowFuture) error {
		var r StudyResult
		if err := f.Get(ctx, &r); err != nil {
			return err
		}
		total.add(r)
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
		cin := ChunkInput{StudyInput: in, Index: i}
		if shared && at > 1 {
			cin.Share = share(i)
		}
		pending = append(pending, workflow.ExecuteChildWorkflow(cw, ChunkWorkflowName, cin))
	}
	for len(pending) > 0 {
		if shared && at > 1 && len(pending) == 1 {
			// Alone now: the whole limit. A chunk that has ended already
			// cannot take the signal, which is then of no use.
			_ = pending[0].SignalChildWorkflow(ctx, signalWholeLimit, nil).Get(ctx, nil)
		}
		if err := wait(pending[0]); err != nil {
			return total, err
		}
		pending = pending[1:]
	}
	return total, nil
}

// chunksSharing runs the plan's chunks `at` at a time, each with its share
// of every queue's in-flight limit (versionReshare). A chunk that ends
// hands its share to the next chunk, whichever chunk ends first; once no
// chunk is left to start, the shares of those that end go to those still
// running (signalShare), so that the plan's last chunks keep every worker
// busy rather than a share each.
func chunksSharing(ctx workflow.Context, in StudyInput, chunks, at int, total *StudyResult) error {
	type running struct {
		f     workflow.ChildWorkflowFuture
		share int
	}
	var pending []running
	start := func(i, share int) {
		cw := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: fmt.Sprintf("%s/chunk-%d", WorkflowID(in.Study, in.Execution), i),
		})
		f := workflow.ExecuteChildWorkflow(cw, ChunkWorkflowName, ChunkInput{StudyInput: in, Index: i, Share: share})
		pending = append(pending, running{f: f, share: share})
	}
	for i := range at {
		n := in.InFlight / at
		if i < in.InFlight%at {
			n++
		}
		start(i, n)
	}
	next := at
	for len(pending) > 0 {
		ended, endErr := -1, error(nil)
		sel := workflow.NewSelector(ctx)
		for j := range pending {
			sel.AddFuture(pending[j].f, func(f workflow.Future) {
				var r StudyResult
				endErr = f.Get(ctx, &r)
				total.add(r)
				ended = j
			})
		}
		sel.Select(ctx)
		if endErr != nil {
			return endErr
		}
		freed := pending[ended].share
		pending = append(pending[:ended], pending[ended+1:]...)
		if next < chunks {
			start(next, freed)
			next++
			continue
		}
		// No chunk left to start: the freed share goes to those running,
		// split as evenly as it divides. A chunk that has ended already
		// cannot take the signal, which is then of no use.
		for j := range pending {
			pending[j].share += freed / len(pending)
			if j < freed%len(pending) {
				pending[j].share++
			}
			_ = pending[j].f.SignalChildWorkflow(ctx, signalShare, pending[j].share).Get(ctx, nil)
		}
	}
	return nil
}

// Change ids of the workflows, each one change behind workflow.GetVersion
// so that the kept histories of the versions before it still replay
// (docs/scale-out.md, Changing the workflows; TestReplayRecordedHistories).
const (
	// versionPerQueue (v1): a chunk's in-flight limit holds per task
	// queue, each queue taking its trials in plan order on its own, so a
	// queue with few workers no longer holds back the others' trials.
	// Before it: InFlight trials of the chunk at once, in plan order.
	versionPerQueue = "per-queue-in-flight"
	// versionStartWait (v1): a trial waits StartWait for a worker of its
	// queue (Temporal's ScheduleToStart timeout), then ends as an error
	// receipt naming the queue and what would serve it. Before it: a trial
	// on a queue no worker served waited forever.
	versionStartWait = "schedule-to-start"
	// versionStopping (v1): a design with a stopping rule runs its chunks
	// one at a time and each chunk block by block, the coordinator taking
	// the rule's look after every block; a settled look schedules no
	// further trial. Before it: such designs were refused at submit.
	versionStopping = "stopping-rule"
	// versionSharedInFlight (v1): the chunks that run side by side share
	// each queue's in-flight limit (RunOptions.InFlight is the
	// execution's). Before it: each chunk had the whole limit, so a queue
	// held twice its workers' trials, half of them waiting a whole trial.
	versionSharedInFlight = "shared-in-flight"
	// versionReshare (v1): the chunks side by side hand on their shares of
	// the limit: a chunk that ends gives its share to the next one to start
	// (the first to end, not the first started), and once none is left to
	// start, to those still running (signalShare). Before it: a chunk
	// started when the oldest ended, and only the last one left running
	// took the whole limit back, so with many chunks side by side the
	// plan's tail ran on a share each.
	versionReshare = "reshare-in-flight"
	// versionArmAffinity (v1): a slot freed by a trial of arm A goes to the
	// queue's next trial of arm A, so that the worker it leaves idle keeps
	// the runtime and model it has up (queueByArm). Before it: each queue's
	// trials in plan order, whatever arm the idle worker had loaded.
	versionArmAffinity = "arm-affinity"
	// versionAdvertised (v1): a chunk keeps in flight, per queue, the
	// slots the queue's live workers advertise (advertise.go), as the
	// coordinator counts them at the chunk's start and at each trial's
	// merge or loss, within the chunk's share of the in-flight limit
	// (queueCounts). Before it: the limit alone, so trials beyond the
	// workers' slots waited on the engine.
	versionAdvertised = "advertised-slots"
)

// signalWholeLimit tells a chunk started with a share of each queue's
// in-flight limit (ChunkInput.Share) that it now runs alone and may take
// the whole limit.
const signalWholeLimit = "rig.whole-in-flight"

// signalShare gives a chunk started with a share of each queue's in-flight
// limit a larger one (its payload, the new share), from versionReshare on.
const signalShare = "rig.in-flight-share"

// ChunkWorkflow runs one chunk's trials, InFlight at a time per task queue.
func ChunkWorkflow(ctx workflow.Context, in ChunkInput) (StudyResult, error) {
	cctx := coordinatorOptions(ctx, in.Coordinator)
	var trials []PlannedTrial
	if err := workflow.ExecuteActivity(cctx, actChunk, in).Get(ctx, &trials); err != nil {
		return StudyResult{}, err
	}
	res := StudyResult{Trials: len(trials), Workers: map[string]int{}}
	if workflow.GetVersion(ctx, versionPerQueue, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res, chunkInPlanOrder(ctx, in, trials, &res)
	}
	if in.Stopping && workflow.GetVersion(ctx, versionStopping, workflow.DefaultVersion, 1) >= 1 {
		return res, chunkByBlocks(ctx, in, trials, &res)
	}
	return res, runPerQueue(ctx, in.StudyInput, trials, &res, in.Share, nil)
}

// studyByBlocks runs the plan of a design with a stopping rule: its chunks
// (whole blocks each) one at a time, in plan order, until one reports that
// the rule settled every monitored comparison. The trials after that are
// never scheduled; the coordinator has recorded them as not run.
func studyByBlocks(ctx workflow.Context, in StudyInput, info PlanInfo) (StudyResult, error) {
	total := StudyResult{Trials: info.Trials, Workers: map[string]int{}}
	for i, lo := range info.Bounds {
		hi := info.Trials
		if i+1 < len(info.Bounds) {
			hi = info.Bounds[i+1]
		}
		cw := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID: fmt.Sprintf("%s/chunk-%d", WorkflowID(in.Study, in.Execution), i),
		})
		var r StudyResult
		if err := workflow.ExecuteChildWorkflow(cw, ChunkWorkflowName, ChunkInput{StudyInput: in, Index: i, Lo: lo, Hi: hi, Stopping: true}).Get(ctx, &r); err != nil {
			return total, err
		}
		total.add(r)
		if r.Stopped {
			total.Stopped, total.NotRun = true, r.NotRun
			break
		}
	}
	return total, nil
}

// chunkByBlocks runs a chunk of whole plan blocks one block at a time (its
// trials side by side, InFlight per queue), and after each block asks the
// coordinator for the stopping rule's look, exactly where the local runner
// takes it. A settled look ends the chunk with Stopped.
func chunkByBlocks(ctx workflow.Context, in ChunkInput, trials []PlannedTrial, res *StudyResult) error {
	cctx := coordinatorOptions(ctx, in.Coordinator)
	slots := map[string]int{} // each queue's advertised slots, as the last block's merges left them
	for lo := 0; lo < len(trials); {
		hi := lo + 1
		for hi < len(trials) && trials[hi].Block == trials[lo].Block {
			hi++
		}
		if err := runPerQueue(ctx, in.StudyInput, trials[lo:hi], res, 0, slots); err != nil {
			return err
		}
		var s StopResult
		if err := workflow.ExecuteActivity(cctx, actCheckStop, StopCheck{Study: in.Study, Execution: in.Execution, Through: trials[hi-1].Index}).Get(ctx, &s); err != nil {
			return err
		}
		if s.Stopped {
			res.Stopped, res.NotRun = true, s.NotRun
			return nil
		}
		lo = hi
	}
	return nil
}

// add sums one trial's (or chunk's) result into res.
func (res *StudyResult) add(r StudyResult) {
	res.Counted += r.Counted
	res.Errors += r.Errors
	res.Retried += r.Retried
	for w, n := range r.Workers {
		res.Workers[w] += n
	}
}

// runPerQueue runs trials that have no counted receipt yet, at most
// InFlight of each task queue at once, and (versionAdvertised) no more than
// the slots the queue's workers advertise (queueCounts). Each queue takes its own trials in
// plan order, so trials waiting on a queue with few workers do not hold a
// slot another queue could use. It returns when every trial has ended.
//
// slots, when given, is each queue's count of advertised slots carried
// from one call to the next (a chunk run block by block); nil starts from
// the trials' own.
func runPerQueue(ctx workflow.Context, in StudyInput, trials []PlannedTrial, res *StudyResult, share int, slots map[string]int) error {
	queues, byQueue := groupByQueue(trials, res)
	limit := int64(max(in.InFlight, 1))
	// A chunk side by side with another starts with its share of each
	// queue's limit: the rest of each queue's slots are held back until the
	// parent says the chunk is alone (signalWholeLimit).
	held := int64(0)
	if share > 0 && int64(share) < limit {
		held = limit - int64(share)
	}
	sems := make([]workflow.Semaphore, len(queues))
	for i := range queues {
		sems[i] = workflow.NewSemaphore(ctx, limit)
		if held > 0 {
			if err := sems[i].Acquire(ctx, held); err != nil {
				return err
			}
		}
	}
	if held > 0 {
		workflow.Go(ctx, func(ctx workflow.Context) { releaseHeldOnSignal(ctx, sems, &held, limit) })
	}
	affinity := workflow.GetVersion(ctx, versionArmAffinity, workflow.DefaultVersion, 1) >= 1
	var counts *queueCounts
	if workflow.GetVersion(ctx, versionAdvertised, workflow.DefaultVersion, 1) >= 1 {
		counts = newQueueCounts(trials, slots, int(limit), func() int { return int(limit - held) })
	}
	wg := workflow.NewWaitGroup(ctx)
	var firstErr error
	for qi, q := range queues {
		wg.Add(1)
		if affinity {
			workflow.Go(ctx, func(ctx workflow.Context) {
				defer wg.Done()
				if err := queueByArm(ctx, in, byQueue[q], sems[qi], counts, res); err != nil && firstErr == nil {
					firstErr = err
				}
			})
			continue
		}
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			queueInPlanOrder(ctx, in, byQueue[q], sems[qi], counts, res, &firstErr)
		})
	}
	wg.Wait(ctx)
	return firstErr
}

// groupByQueue counts the trials already done in res and groups the rest by
// task queue, the queues in order of first appearance: deterministic.
func groupByQueue(trials []PlannedTrial, res *StudyResult) ([]string, map[string][]PlannedTrial) {
	var queues []string
	byQueue := map[string][]PlannedTrial{}
	for _, t := range trials {
		if t.Done {
			res.Counted++
			continue
		}
		if _, ok := byQueue[t.Queue]; !ok {
			queues = append(queues, t.Queue)
		}
		byQueue[t.Queue] = append(byQueue[t.Queue], t)
	}
	return queues, byQueue
}

// releaseHeldOnSignal gives each queue's held-back slots to the chunk as the
// parent signals: all of them when the chunk is alone, or down to a new
// share.
func releaseHeldOnSignal(ctx workflow.Context, sems []workflow.Semaphore, held *int64, limit int64) {
	whole, more := workflow.GetSignalChannel(ctx, signalWholeLimit), workflow.GetSignalChannel(ctx, signalShare)
	for *held > 0 {
		give := int64(0)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(whole, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			give = *held
		})
		sel.AddReceive(more, func(c workflow.ReceiveChannel, _ bool) {
			var share int
			c.Receive(ctx, &share)
			give = min(max(*held-(limit-int64(share)), 0), *held)
		})
		sel.Select(ctx)
		for _, sem := range sems {
			sem.Release(give)
		}
		*held -= give
	}
}

// queueCounts is a chunk's count of each queue's advertised slots
// (versionAdvertised): the coordinator's count when it laid the chunk out,
// then the one that came with each trial's merge or loss. A queue's trials
// go out while fewer of the chunk's run than its part of that count
// (chunkSlots). Only activity results change it, so every replay of the
// history waits where the run did.
type queueCounts struct {
	limit   int        // the execution's in-flight limit per queue
	share   func() int // the chunk's part of limit now
	slots   map[string]int
	running map[string]int
}

func newQueueCounts(trials []PlannedTrial, slots map[string]int, limit int, share func() int) *queueCounts {
	if slots == nil {
		slots = map[string]int{}
	}
	c := &queueCounts{limit: limit, share: share, slots: slots, running: map[string]int{}}
	for _, t := range trials {
		if !t.Done && c.slots[t.Queue] == 0 {
			c.slots[t.Queue] = t.QueueSlots
		}
	}
	return c
}

// room says another trial of queue may go out now. A queue with no count
// (a coordinator or fake that gives none) has the limit alone.
func (c *queueCounts) room(queue string) bool {
	n := c.slots[queue]
	return n <= 0 || c.running[queue] < chunkSlots(n, c.share(), c.limit)
}

// wait blocks until room says queue may send a trial, then counts it out.
func (c *queueCounts) wait(ctx workflow.Context, queue string) error {
	if c == nil {
		return nil
	}
	if err := workflow.Await(ctx, func() bool { return c.room(queue) }); err != nil {
		return err
	}
	c.running[queue]++
	return nil
}

// ended counts a trial of queue back in, with the count its last merge or
// loss brought (0: none, the count stays).
func (c *queueCounts) ended(queue string, slots int) {
	if c == nil {
		return
	}
	c.running[queue]--
	if slots > 0 {
		c.slots[queue] = slots
	}
}

// chunkSlots is a chunk's part of a queue's advertised slots: all of them
// when it runs alone (share == limit), and in proportion to its share of
// the in-flight limit while others run beside it, rounded up (a slot left
// idle costs more than a trial that waits on the engine for one), at least
// one, and never over its share.
func chunkSlots(advertised, share, limit int) int {
	share = max(share, 1)
	if advertised >= limit {
		return share
	}
	return min(share, max(1, (advertised*share+limit-1)/max(limit, 1)))
}

// queueInPlanOrder runs one queue's trials in plan order, each as soon as
// sem has a slot, and returns when all have ended. The first error of any
// run is kept in firstErr.
func queueInPlanOrder(ctx workflow.Context, in StudyInput, trials []PlannedTrial, sem workflow.Semaphore, counts *queueCounts, res *StudyResult, firstErr *error) {
	running := workflow.NewWaitGroup(ctx)
	for _, t := range trials {
		if err := counts.wait(ctx, t.Queue); err != nil {
			if *firstErr == nil {
				*firstErr = err
			}
			break
		}
		if err := sem.Acquire(ctx, 1); err != nil {
			if *firstErr == nil {
				*firstErr = err
			}
			break
		}
		running.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer running.Done()
			defer sem.Release(1)
			r, err := runTrial(ctx, in, t, counts)
			if err != nil && *firstErr == nil {
				*firstErr = err
			}
			res.add(r)
		})
	}
	running.Wait(ctx)
}

// queueByArm runs one queue's trials of a chunk, as many at once as sem
// allows (versionArmAffinity). A slot freed by a trial of arm A goes to the
// queue's next trial of arm A, if one is left, else to its next trial in
// plan order. With a queue's in-flight limit at its worker count, the slot
// a trial frees is the worker it leaves idle, polling, and a trial
// scheduled then is matched to that poll: the worker gets another trial of
// the arm whose runtime and model it has up, instead of loading another
// arm's. Each arm's trials still run in plan order, and the first ones of
// the chunk in plan order across arms. A preference, not a guarantee: two
// workers idle at once may take each other's.
func queueByArm(ctx workflow.Context, in StudyInput, trials []PlannedTrial, sem workflow.Semaphore, counts *queueCounts, res *StudyResult) error {
	pending := slices.Clone(trials)
	var freed []string // the arms of trials that ended, oldest first
	var firstErr error
	running := workflow.NewWaitGroup(ctx)
	for len(pending) > 0 {
		if err := counts.wait(ctx, pending[0].Queue); err != nil {
			firstErr = err
			break
		}
		if err := sem.Acquire(ctx, 1); err != nil {
			firstErr = err
			break
		}
		pick := 0
		if len(freed) > 0 {
			arm := freed[0]
			freed = freed[1:]
			if i := slices.IndexFunc(pending, func(p PlannedTrial) bool { return armOf(p.Key) == arm }); i >= 0 {
				pick = i
			}
		}
		t := pending[pick]
		pending = slices.Delete(pending, pick, pick+1)
		running.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer running.Done()
			r, err := runTrial(ctx, in, t, counts)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			res.add(r)
			// Noted before the slot is given back, so that the loop
			// above, woken by the release, hands it to this arm.
			freed = append(freed, armOf(t.Key))
			sem.Release(1)
		})
	}
	running.Wait(ctx)
	return firstErr
}

// armOf is the arm of a planned trial's key ("arm/job-kind/task/repeat").
func armOf(key string) string {
	arm, _, _ := strings.Cut(key, "/")
	return arm
}

// chunkInPlanOrder is the chunk as v0 ran it, kept for its histories:
// InFlight trials of the chunk at once, slots taken in plan order.
func chunkInPlanOrder(ctx workflow.Context, in ChunkInput, trials []PlannedTrial, res *StudyResult) error {
	sem := workflow.NewSemaphore(ctx, int64(max(in.InFlight, 1)))
	wg := workflow.NewWaitGroup(ctx)
	var firstErr error
	for _, t := range trials {
		if t.Done {
			res.Counted++
			continue
		}
		if err := sem.Acquire(ctx, 1); err != nil {
			return err
		}
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			defer sem.Release(1)
			r, err := runTrial(ctx, in.StudyInput, t, nil)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			res.add(r)
		})
	}
	wg.Wait(ctx)
	return firstErr
}

// runTrial runs one trial to a counted receipt or an error receipt: a
// preempted or lost attempt is rerun as the next attempt with its parent; a
// refusal hands the same attempt to another worker of the queue.
func runTrial(ctx workflow.Context, in StudyInput, t PlannedTrial, counts *queueCounts) (res StudyResult, err error) {
	res = StudyResult{Workers: map[string]int{}}
	// The queue's count of advertised slots, as the last merge or loss of
	// this trial's attempts brought it, when the trial ends.
	last := 0
	defer func() { counts.ended(t.Queue, last) }()
	cctx := coordinatorOptions(ctx, in.Coordinator)
	mctx := mergeOptions(ctx, in.Coordinator)
	attempt, parent := t.Attempt, t.Parent
	refusals, lost := 0, 0
	var startWait time.Duration
	if workflow.GetVersion(ctx, versionStartWait, workflow.DefaultVersion, 1) >= 1 {
		startWait = cmp.Or(in.StartWait, DefaultStartWait)
	}
	for {
		wctx := trialAttemptOptions(ctx, t.Queue, startWait)
		lostAttempt := func(why string, seen attemptBeat) (MergeResult, error) {
			lost++
			var m MergeResult
			err := workflow.ExecuteActivity(cctx, actRecordLost, LostAttempt{Study: in.Study, Execution: in.Execution, Key: t.Key,
				Attempt: attempt, Parent: parent, Why: why, Final: lost >= maxLostAttempts, Worker: seen.Worker, Started: seen.Started}).Get(ctx, &m)
			return m, err
		}
		var tr TrialResult
		var m MergeResult
		scheduled := workflow.Now(ctx) // the history's clock: no command
		err := workflow.ExecuteActivity(wctx, actRunTrial, trialInput(in, t, attempt, parent)).Get(ctx, &tr)
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
		case err != nil && startWait > 0 && isStartTimeout(err):
			served, err := settleUnstarted(ctx, cctx, in, t, attempt, parent, startWait)
			if err != nil {
				return res, err
			}
			if served {
				continue
			}
			res.Errors++
			return res, nil
		case err != nil && errors.As(err, &appErr) && (appErr.Type() == ErrMismatch || appErr.Type() == ErrRefused):
			// The stack cannot be the frozen one, or no worker would take
			// it: an error receipt, never a silent gap.
			if err := recordFinalLoss(ctx, cctx, in, t, attempt, parent, "refused: "+appErr.Error()); err != nil {
				return res, err
			}
			res.Errors++
			return res, nil
		case err != nil:
			// The worker died, was cut off or failed before it recorded
			// anything: the attempt is lost (unless it had finished and only
			// its result was lost: then the coordinator merges it).
			if m, err = lostAttempt(err.Error(), lostSeen(err, scheduled)); err != nil {
				return res, err
			}
		default:
			if err := workflow.ExecuteActivity(mctx, actMerge, tr).Get(ctx, &m); err != nil {
				if temporal.IsCanceledError(err) {
					return res, err
				}
				// The coordinator recognizes an entry it can still bring
				// in (a recovered merge): its answer is the outcome.
				if m, err = lostAttempt("its spool entry could not be brought in: "+err.Error(), attemptBeat{Worker: tr.Worker, Started: tr.Started}); err != nil {
					return res, err
				}
			} else {
				res.Workers[tr.Worker]++
			}
		}
		if m.QueueSlots > 0 {
			last = m.QueueSlots
		}
		if tallyOutcome(&res, m.Outcome) {
			parent, attempt = attempt, attempt+1
			continue
		}
		return res, nil
	}
}

// trialInput is what a worker gets to run attempt of trial t.
func trialInput(in StudyInput, t PlannedTrial, attempt, parent int) TrialInput {
	return TrialInput{Study: in.Study, Execution: in.Execution, DesignHash: in.DesignHash, Key: t.Key, Attempt: attempt, Parent: parent,
		Queue: t.Queue, Runtime: t.Runtime, BinarySHA256: t.BinarySHA256, ModelSHA256: t.ModelSHA256}
}

// mergeOptions runs the merge of a worker's spool entry on the coordinator.
func mergeOptions(ctx workflow.Context, coordinator string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           coordinator,
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    coordinatorHeartbeatTimeout, // as coordinatorOptions
		// A spool entry that is still incomplete after these tries was cut
		// off: the attempt is lost and rerun.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			MaximumAttempts: 6, NonRetryableErrorTypes: []string{ErrMismatch}},
	})
}

// trialAttemptOptions runs one attempt of a trial on a worker of queue.
func trialAttemptOptions(ctx workflow.Context, queue string, startWait time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: queue,
		// No worker of the queue took it within this: nothing serves
		// the queue (0, before versionStartWait: no limit).
		ScheduleToStartTimeout: startWait,
		// A trial's own caps bound it; this only catches a worker that
		// keeps heartbeating on a trial that never ends.
		StartToCloseTimeout: 24 * time.Hour,
		// A killed or cut-off worker stops heartbeating: the engine
		// notices within this, and the attempt is rerun elsewhere.
		HeartbeatTimeout: 20 * time.Second,
		// rig, not the engine, decides what a failed attempt means.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// settleUnstarted handles an attempt no worker took within startWait. Busy
// workers do not poll: the coordinator tells a busy queue (served: the same
// attempt waits again) from one no worker serves (an error receipt that says
// what would, instead of a trial that waits forever).
func settleUnstarted(ctx, cctx workflow.Context, in StudyInput, t PlannedTrial, attempt, parent int, startWait time.Duration) (served bool, err error) {
	var q QueueState
	if err := workflow.ExecuteActivity(cctx, actQueueServed, QueueCheck{Study: in.Study, Execution: in.Execution, Queue: t.Queue,
		Within: startWait}).Get(ctx, &q); err != nil {
		return false, err
	}
	if q.Served {
		return true, nil
	}
	return false, recordFinalLoss(ctx, cctx, in, t, attempt, parent, unserved(t, startWait))
}

// recordFinalLoss records the attempt as lost with no attempt to follow: an
// error receipt that says why.
func recordFinalLoss(ctx, cctx workflow.Context, in StudyInput, t PlannedTrial, attempt, parent int, why string) error {
	return workflow.ExecuteActivity(cctx, actRecordLost, LostAttempt{Study: in.Study, Execution: in.Execution, Key: t.Key,
		Attempt: attempt, Parent: parent, Why: why, Final: true}).Get(ctx, nil)
}

// tallyOutcome counts a merged attempt's outcome in res and reports whether
// the trial runs again, by the runner's own rerun rule
// (receipts.Outcome.Rerun).
func tallyOutcome(res *StudyResult, outcome receipts.Outcome) (rerun bool) {
	switch {
	case outcome.Rerun() || outcome == "":
		res.Retried++
		return true
	case outcome == receipts.Error:
		res.Errors++
	default:
		res.Counted++
	}
	return false
}

// isStartTimeout says the trial activity timed out waiting for a worker of
// its queue (ScheduleToStart), not while running.
func isStartTimeout(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enums.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// unserved is the error receipt's detail for a trial no worker took: the
// queue, and the worker that would serve it.
func unserved(t PlannedTrial, wait time.Duration) string {
	card := t.CardClass
	if card == "" {
		card = "as the queue names it"
	}
	return fmt.Sprintf("no worker took it from task queue %s within %s (--start-wait): the queue is served by rig worker on a machine whose %s build has sha256 %s, with card class %s; start one there (docs/scale-out.md, Launching workers), then rig study rerun",
		t.Queue, wait, t.Runtime, t.BinarySHA256, card)
}
