package scaleout

import (
	"context"
	"sync"

	"go.temporal.io/sdk/worker"
)

// cardSlot is a worker's trial slots, shared by the pollers of all its
// task queues (a worker.SlotSupplier given to each through its tuner): one,
// or the slots (pins.slots) of the arm whose runtime the worker runs.
//
// Temporal reserves a slot before each poll and hands the task to whichever
// poll it matched, so a worker with one poller per queue, each with a slot
// of its own, took one trial per queue and ran one: the rest waited on the
// card while other workers idled. Here a poll is started only while fewer
// tasks of this worker run than it has slots, one poll per queue at a
// time. Polls already in flight when a task arrives on another queue can
// still deliver one: the worker refuses it at once (busy), so the engine
// hands it to another worker rather than it waiting here.
type cardSlot struct {
	mu      sync.Mutex
	polling map[string]bool // queues with a poll out
	used    int             // slots whose task is running
	most    int             // the slots: tasks run at once
	changed chan struct{}   // closed and replaced at each change
}

func newCardSlot() *cardSlot {
	return &cardSlot{polling: map[string]bool{}, most: 1, changed: make(chan struct{})}
}

// setMost makes n (at least 1) the tasks the pollers take at once: the
// slots of the arm whose runtime the worker now runs.
func (s *cardSlot) setMost(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n = max(n, 1); n != s.most {
		s.most = n
		s.signal()
	}
}

// slots is the tasks the pollers take at once now.
func (s *cardSlot) slots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

// ticket is a slot's permit: the queue it polls, and whether a task came.
type ticket struct {
	queue string
	used  bool
}

func (s *cardSlot) ReserveSlot(ctx context.Context, info worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	q := info.TaskQueue()
	for {
		s.mu.Lock()
		if s.used < s.most && !s.polling[q] {
			s.polling[q] = true
			s.mu.Unlock()
			return &worker.SlotPermit{UserData: &ticket{queue: q}}, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// TryReserveSlot is for eager tasks, which a trial never is (its workflow
// runs on the coordinator's queue): none is taken.
func (s *cardSlot) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit { return nil }

func (s *cardSlot) MarkSlotUsed(info worker.SlotMarkUsedInfo) {
	t, ok := info.Permit().UserData.(*ticket)
	if !ok {
		return
	}
	s.mu.Lock()
	t.used = true
	s.used++
	// The queue's poll is over: it may poll again while a slot is free.
	delete(s.polling, t.queue)
	s.signal()
	s.mu.Unlock()
}

func (s *cardSlot) ReleaseSlot(info worker.SlotReleaseInfo) {
	t, ok := info.Permit().UserData.(*ticket)
	if !ok {
		return
	}
	s.mu.Lock()
	if t.used {
		t.used = false
		s.used--
	} else {
		delete(s.polling, t.queue)
	}
	s.signal()
	s.mu.Unlock()
}

// MaxSlots is the trials the card runs at once.
func (s *cardSlot) MaxSlots() int { return s.slots() }

func (s *cardSlot) signal() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// tuner is the tuner of one queue's poller: this worker's shared card slot
// for activities, and small fixed slots for the task kinds a trial worker
// never runs (it has no workflow worker), which the SDK still asks for.
func (s *cardSlot) tuner() (worker.WorkerTuner, error) {
	fixed := func() worker.SlotSupplier {
		f, _ := worker.NewFixedSizeSlotSupplier(2)
		return f
	}
	return worker.NewCompositeTuner(worker.CompositeTunerOptions{
		WorkflowSlotSupplier: fixed(), ActivitySlotSupplier: s, LocalActivitySlotSupplier: fixed(),
		NexusSlotSupplier: fixed(), SessionActivitySlotSupplier: fixed(),
	})
}

// trialGate admits the trials a worker runs at once: any one when none
// runs, then more of the same arm (study, execution and arm) up to its
// slots; a trial of another arm waits for none of them and is refused
// (busy). A replay takes the worker alone (lockAlone).
type trialGate struct {
	mu      sync.Mutex
	arm     string // the arm of the trials running, "" for a replay
	n       int    // trials (or a replay) running
	slots   int    // the arm's slots, once its runtime is known; 1 before
	changed chan struct{}
}

func newTrialGate() *trialGate { return &trialGate{slots: 1, changed: make(chan struct{})} }

// admit takes a place for a trial of arm, or says false (busy).
func (g *trialGate) admit(arm string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.n == 0:
		if g.arm != arm {
			g.slots = 1
		}
		g.arm, g.n = arm, 1
		return true
	case g.arm == arm && arm != "" && g.n < g.slots:
		g.n++
		return true
	}
	return false
}

// setSlots records the slots of arm's runtime, once the trial that started
// it knows them.
func (g *trialGate) setSlots(arm string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.arm == arm {
		g.slots = max(n, 1)
	}
}

// done gives a place back.
func (g *trialGate) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	close(g.changed)
	g.changed = make(chan struct{})
}

// lockAlone waits until no trial runs, then holds the worker alone until
// done: a replay starts its own runtime.
func (g *trialGate) lockAlone(ctx context.Context) error {
	for {
		g.mu.Lock()
		if g.n == 0 {
			g.arm, g.n, g.slots = "", 1, 1
			g.mu.Unlock()
			return nil
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
