package scaleout

import (
	"context"
	"sync"

	"go.temporal.io/sdk/worker"
)

// cardSlot is a worker's one trial slot, shared by the pollers of all its
// task queues (a worker.SlotSupplier given to each through its tuner).
//
// Temporal reserves a slot before each poll and hands the task to whichever
// poll it matched, so a worker with one poller per queue, each with a slot
// of its own, took one trial per queue and ran one: the rest waited on the
// card while other workers idled. Here a poll is started only while no task
// of this worker runs, and a queue polls again only once its last task is
// done. Polls already in flight when a task arrives on another queue can
// still deliver one: the worker refuses it at once (busy), so the engine
// hands it to another worker rather than it waiting here.
type cardSlot struct {
	mu      sync.Mutex
	polling map[string]bool // queues with a slot out (polling, or their task running)
	used    int             // slots whose task is running
	changed chan struct{}   // closed and replaced at each change
}

func newCardSlot() *cardSlot {
	return &cardSlot{polling: map[string]bool{}, changed: make(chan struct{})}
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
		if s.used == 0 && !s.polling[q] {
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
	s.signal()
	s.mu.Unlock()
}

func (s *cardSlot) ReleaseSlot(info worker.SlotReleaseInfo) {
	t, ok := info.Permit().UserData.(*ticket)
	if !ok {
		return
	}
	s.mu.Lock()
	delete(s.polling, t.queue)
	if t.used {
		t.used = false
		s.used--
	}
	s.signal()
	s.mu.Unlock()
}

// MaxSlots is the trials the card runs at once.
func (s *cardSlot) MaxSlots() int { return 1 }

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
