package scaleout

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
)

// servedQueues remembers when a worker of each trial queue last returned a
// trial the coordinator merged. A worker busy with a long trial does not
// poll, so the engine's list of a queue's pollers can be empty while the
// queue is served; a merge from it says otherwise.
type servedQueues struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *servedQueues) note(queue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[string]time.Time{}
	}
	s.at[queue] = time.Now()
}

func (s *servedQueues) last(queue string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[queue]
}

// noteMerged notes that a worker of the trial's queue returned it.
func (c *Coordinator) noteMerged(study, arm string) {
	snap, err := c.studies.Snapshot(study)
	if err != nil {
		return
	}
	d, err := c.designOf(snap)
	if err != nil {
		return
	}
	a := d.Arm(arm)
	if a == nil {
		return
	}
	kind, bin := snap.ArmRuntime(*a)
	c.served.note(Queue(kind, bin, ArmCardClass(d, *a)))
}

// QueueServed is the coordinator's activity for a trial that waited its
// whole start wait on its queue. The queue is served when a worker of it
// returned a trial within that wait (its workers are busy), or when the
// engine saw a worker poll it lately (Temporal keeps a queue's pollers for
// about five minutes); else no worker serves it, and the trial ends as an
// error receipt.
func (c *Coordinator) QueueServed(ctx context.Context, q QueueCheck) (QueueState, error) {
	if t := c.served.last(q.Queue); !t.IsZero() && time.Since(t) < q.Within {
		return QueueState{Served: true, Why: fmt.Sprintf("a worker of %s returned a trial %s ago", q.Queue, time.Since(t).Round(time.Second))}, nil
	}
	resp, err := c.client.DescribeTaskQueue(ctx, q.Queue, enums.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return QueueState{}, fmt.Errorf("describing task queue %s at %s: %w", q.Queue, c.cfg.Address, err)
	}
	if ps := resp.GetPollers(); len(ps) > 0 {
		return QueueState{Served: true, Why: fmt.Sprintf("%d worker(s) polled %s lately (%s)", len(ps), q.Queue, ps[0].GetIdentity())}, nil
	}
	return QueueState{Why: fmt.Sprintf("no worker polled %s lately, and none returned a trial of it within %s", q.Queue, q.Within)}, nil
}
