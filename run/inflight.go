package run

// Several trials of one arm in flight on its runtime's slots (pins.slots):
// the arm's stretch of a block goes out up to N at a time, the next trial
// starting as soon as one ends. The plan's order stays the record's order
// where it matters: the stopping rule is fed the stretch's receipts in plan
// order once the stretch has ended, as a resumed execution replays them.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"rig/receipts"
	"rig/studies"
)

// slotRound is the trials in flight together on one start of a runtime. A
// preemption of one preempts them all: the governor stopped, or a crash
// took, the runtime they share.
type slotRound struct {
	mu   sync.Mutex
	why  string
	stop chan struct{}
}

func newSlotRound() *slotRound { return &slotRound{stop: make(chan struct{})} }

// preempt preempts every trial in flight in the round; the first reason
// stays.
func (r *slotRound) preempt(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.why == "" {
		r.why = why
		close(r.stop)
	}
}

// preempted is closed once a trial of the round was preempted; nil (never
// closed) for a trial alone.
func (r *slotRound) preempted() <-chan struct{} {
	if r == nil {
		return nil
	}
	return r.stop
}

// reason is why the round was preempted; "" when it was not, or for a
// trial alone.
func (r *slotRound) reason() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.why
}

// heldSink is a local execution's sink for trials in flight together: the
// receipts go to the store as they end, and the stopping rule's monitor is
// fed later, in plan order (stretch). Each trial's last receipt is kept
// for that.
type heldSink struct {
	storeSink
	mu   sync.Mutex
	last map[receipts.TrialKey]receipts.Receipt
}

func (s *heldSink) PutReceipt(ctx context.Context, rec receipts.Receipt) error {
	if err := s.x.store.PutReceipt(ctx, rec); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.x.env.Stored != nil {
		s.x.env.Stored(rec) // metrics, told one receipt at a time
	}
	s.last[rec.Trial()] = rec
	return nil
}

// stretchEnd is the end (exclusive) of the stretch of trials from i that
// share its arm and block: what one start of the arm's runtime serves.
func stretchEnd(plan *studies.Plan, i int) int {
	j := i + 1
	for j < len(plan.Trials) && plan.Trials[j].Key.Arm == plan.Trials[i].Key.Arm && plan.Trials[j].Block == plan.Trials[i].Block {
		j++
	}
	return j
}

// stretch runs the trials plan.Trials[lo:hi] that have no counted receipt,
// up to the arm's slots at a time, then tells the monitor every trial of
// the stretch in plan order and makes the check the last one's block end
// calls for, as loop does one trial at a time.
func (x *execution) stretch(ctx context.Context, plan *studies.Plan, lo, hi int, counted map[receipts.TrialKey]receipts.Receipt, est *eta, progress func()) error {
	arm := x.design.Arm(plan.Trials[lo].Key.Arm)
	if arm == nil {
		return fmt.Errorf("trial %s: arm %s is not in the frozen design", plan.Trials[lo].Key, plan.Trials[lo].Key.Arm)
	}
	var pending []studies.TrialKey
	for _, t := range plan.Trials[lo:hi] {
		if _, ok := counted[receiptTrial(t.Key)]; !ok {
			pending = append(pending, t.Key)
		}
	}
	sink := &heldSink{storeSink: storeSink{x}, last: map[receipts.TrialKey]receipts.Receipt{}}
	began, total := time.Now(), len(pending)
	finished := 0
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		done, err := x.round(ctx, sink, *arm, pending)
		if err != nil {
			return err
		}
		var again []studies.TrialKey
		preempted := false
		for _, k := range pending {
			o, ok := done[k]
			switch {
			case !ok || o.Rerun():
				// Preempted, or not started: it goes out again.
				again = append(again, k)
			default:
				finished++
				x.state.mu.Lock()
				x.state.info.Done++
				if o == receipts.Error {
					x.state.info.Failed++
				}
				x.state.info.ETA = est.leftInFlight(arm.Name, time.Since(began), finished, total-finished, remaining(plan, hi-1, counted)).Round(time.Second).String()
				x.state.mu.Unlock()
				progress()
			}
			if ok && o.Rerun() {
				preempted = true
				x.state.mu.Lock()
				x.state.info.Preempted++
				x.state.mu.Unlock()
			}
		}
		pending = again
		if len(pending) > 0 && preempted {
			// A preemption: the gates first, as for a trial alone.
			if err := x.waitForGates(ctx); err != nil {
				return err
			}
		}
	}
	if finished > 0 {
		// Each trial's share of the stretch's wall time: N in flight cost
		// the stretch, not N times their own walls.
		x.state.mu.Lock()
		for range finished {
			est.observe(arm.Name, time.Since(began)/time.Duration(finished))
		}
		x.state.info.ETA = est.left(remaining(plan, hi-1, counted)).Round(time.Second).String()
		x.state.mu.Unlock()
	}
	if x.mon == nil {
		return nil
	}
	for _, t := range plan.Trials[lo:hi] {
		k := receiptTrial(t.Key)
		if rc, ok := counted[k]; ok {
			x.mon.record(rc)
		} else if rc, ok := sink.last[k]; ok {
			x.mon.record(rc)
		}
	}
	return x.checkStop(ctx, plan, hi-1, nil)
}

// round starts the arm's runtime (or keeps it) and runs keys on it, up to
// its slots at once, in plan order. It stops sending more after a trial
// that ends the runtime: a preemption preempts the others in flight; after
// an error or a failure at the card the others finish, and the runtime is
// released. It returns the outcome of each trial that ran.
func (x *execution) round(ctx context.Context, sink *heldSink, arm studies.Arm, keys []studies.TrialKey) (map[studies.TrialKey]receipts.Outcome, error) {
	outcome, started, err := x.keepArm(ctx, sink, arm, keys[0])
	if err != nil {
		return nil, err
	}
	if !started {
		return map[studies.TrialKey]receipts.Outcome{keys[0]: outcome}, nil
	}
	if x.res != nil {
		x.res.ResetPeak()
	}
	rt, peers := x.cur, newSlotRound()
	r := &roundState{x: x, keys: keys, done: map[studies.TrialKey]receipts.Outcome{}, inFlight: map[studies.TrialKey]bool{}}
	var wg sync.WaitGroup
	// The free slots, numbered from 1: each trial holds one while in
	// flight and asks the runtime to serve it there, so that the runtime's
	// report of that slot is the trial's own progress (slotprogress.go).
	free := make(chan int, arm.Pins.SlotCount())
	for n := 1; n <= arm.Pins.SlotCount(); n++ {
		free <- n
	}
	for _, k := range keys {
		slot := 0
		select {
		case slot = <-free:
		case <-peers.preempted():
		}
		if slot == 0 || !r.admit(k, peers) {
			break
		}
		wg.Add(1)
		go func(k studies.TrialKey, slot int) {
			defer wg.Done()
			defer func() { free <- slot }()
			o, err := x.runTrial(ctx, sink, arm, rt, k, peers, slot)
			r.finish(k, o, err, peers)
		}(k, slot)
	}
	wg.Wait()
	if r.firstErr != nil {
		return nil, r.firstErr
	}
	if r.ended {
		// The runtime was stopped or died: the next round gets a fresh one.
		x.release(ctx)
	}
	return r.done, nil
}

// roundState is what the trials of one round in flight share: their
// outcomes, which are in flight, and whether the round must send no more.
type roundState struct {
	x        *execution
	keys     []studies.TrialKey
	mu       sync.Mutex
	firstErr error
	ended    bool // a trial ended the runtime: send no more
	inFlight map[studies.TrialKey]bool
	done     map[studies.TrialKey]receipts.Outcome
}

// admit marks k in flight, unless the round must send no more.
func (r *roundState) admit(k studies.TrialKey, peers *slotRound) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended || r.firstErr != nil || peers.reason() != "" {
		return false
	}
	r.inFlight[k] = true
	r.showCurrent()
	return true
}

// finish records how k ended; a preempted trial preempts its peers, and an
// error or a failure at the card ends the round.
func (r *roundState) finish(k studies.TrialKey, o receipts.Outcome, err error, peers *slotRound) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inFlight, k)
	r.showCurrent()
	switch {
	case err != nil:
		// Going on is unsafe: send no more, let those in flight end.
		if r.firstErr == nil {
			r.firstErr = fmt.Errorf("trial %s: %w", k, err)
		}
		return
	case o == receipts.Preempted:
		r.ended = true
		peers.preempt(fmt.Sprintf("a trial in flight beside it on the same runtime (%s) was preempted", k))
	case o == receipts.Error || o == receipts.FailedAtCard:
		r.ended = true
	}
	r.done[k] = o
}

// showCurrent puts the trials in flight, in plan order, on the progress.
// The caller holds r.mu.
func (r *roundState) showCurrent() {
	var ks []string
	for _, k := range r.keys {
		if r.inFlight[k] {
			ks = append(ks, k.String())
		}
	}
	r.x.state.mu.Lock()
	r.x.state.info.Current = strings.Join(ks, ", ")
	r.x.state.mu.Unlock()
}
