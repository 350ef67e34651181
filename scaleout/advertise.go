package scaleout

import (
	"errors"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"rig/internal/atomicfile"
	"rig/studies"
)

// A worker advertises, per task queue it serves, how many trials of that
// queue it takes at once (its arm's slots), and the coordinator keeps that
// many of the queue's trials in flight: the sum over the queue's live
// workers, at least 1, never over the execution's --in-flight. Trials the
// queue's workers cannot take would only wait on the engine (a whole trial
// each, their start wait running), and a worker that keeps its arm gets the
// slot its ended trial freed.
//
// The advertisements are files in the spool, which every worker and the
// coordinator reach already:
//
//	SPOOL/.workers/WORKER.json   {"worker": ..., "slots": {QUEUE: N}, "at": ...}
//
// A polling worker rewrites its file when its slots change and every
// advertEvery; it removes it when it stops taking trials. A file older
// than advertFresh is a worker gone (killed, cut off), and counts no more.
// The folder's dot keeps it apart from the studies' folders.

// advertsDir is the spool's folder of the workers' advertisements.
const advertsDir = ".workers"

// advertEvery is how often a polling worker rewrites its advertisement;
// advertFresh is how old one may be and still count: the trial heartbeat's
// timeout, within which the engine notices a worker gone too.
const (
	advertEvery = 5 * time.Second
	advertFresh = 20 * time.Second
)

// advertRead is how long the coordinator reuses its reading of the
// advertisements: every merge asks, and a fleet's spool is a file server.
const advertRead = time.Second

// Advert is one worker's advertisement: the trials it takes at once per
// task queue, and when it said so.
type Advert struct {
	Worker string         `json:"worker"`
	Slots  map[string]int `json:"slots"`
	At     time.Time      `json:"at"`
}

// advertPath is worker's advertisement file in spool; the worker's name is
// escaped into one path element.
func advertPath(spool, worker string) string {
	return filepath.Join(spool, advertsDir, url.PathEscape(worker)+".json")
}

// writeAdvert writes a's file in spool whole (a reader never sees half).
func writeAdvert(spool string, a Advert) error {
	p := advertPath(spool, a.Worker)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteJSON(p, a, 0o644)
}

// removeAdvert withdraws worker's advertisement: it takes no trials now.
func removeAdvert(spool, worker string) error {
	err := os.Remove(advertPath(spool, worker))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// readAdverts is every advertisement in spool that is still fresh at now.
// A file that cannot be read or parsed (a write cut off, another account's)
// counts for nothing: its worker is counted again at its next write.
func readAdverts(spool string, now time.Time) []Advert {
	ents, err := os.ReadDir(filepath.Join(spool, advertsDir))
	if err != nil {
		return nil
	}
	var out []Advert
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var a Advert
		if err := atomicfile.ReadJSON(filepath.Join(spool, advertsDir, e.Name()), &a); err != nil {
			continue
		}
		if fresh(a, now) {
			out = append(out, a)
		}
	}
	return out
}

// fresh says a still counts at now: written within advertFresh (a clock a
// little ahead on the worker's machine is no reason to drop it).
func fresh(a Advert, now time.Time) bool {
	age := now.Sub(a.At)
	return age <= advertFresh && age >= -advertFresh
}

// slotsPerQueue sums the advertised slots of each queue.
func slotsPerQueue(ads []Advert) map[string]int {
	sum := map[string]int{}
	for _, a := range ads {
		for q, n := range a.Slots {
			sum[q] += max(n, 0)
		}
	}
	return sum
}

// QueueSlots is what the coordinator tells a chunk of one queue: the slots
// its live workers advertise, at least 1 (a queue no worker advertises yet
// still gets a trial, whose wait for a worker says what serves it).
func QueueSlots(advertised int) int { return max(advertised, 1) }

// adverts is the coordinator's reading of the advertisements, reused for
// advertRead.
type adverts struct {
	mu   sync.Mutex
	at   time.Time
	sums map[string]int
}

// slots is the queue's advertised slots now, as QueueSlots counts them.
func (s *adverts) slots(spool, queue string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); s.sums == nil || now.Sub(s.at) >= advertRead {
		s.sums, s.at = slotsPerQueue(readAdverts(spool, now)), now
	}
	return QueueSlots(s.sums[queue])
}

// queueSlotsOf is the advertised slots of the queue of study's arm, 0 when
// the arm's queue cannot be named (the chunk then keeps what it had).
func (c *Coordinator) queueSlotsOf(study, arm string) int {
	snap, err := c.studies.Snapshot(study)
	if err != nil {
		return 0
	}
	d, err := c.designOf(snap)
	if err != nil {
		return 0
	}
	a := d.Arm(arm)
	if a == nil {
		return 0
	}
	kind, bin := snap.ArmRuntime(*a)
	return c.adverts.slots(c.cfg.Spool, Queue(kind, bin, ArmCardClass(d, *a)))
}

// designSlots is, per task queue, the widest slots a frozen design pins for
// the arms of that queue: what a worker serving the queue takes at once
// once it runs such an arm.
func designSlots(snap *studies.Snapshot) map[string]int {
	d, err := snap.DesignValue()
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, a := range d.Arms {
		kind, bin := snap.ArmRuntime(a)
		q := Queue(kind, bin, ArmCardClass(d, a))
		out[q] = max(out[q], a.Pins.SlotCount())
	}
	return out
}

// advertised is the worker's advertisement now: per queue it serves, the
// slots of the runtime it runs when that runtime's arm is of the queue (no
// more than the runtime serves), else the widest slots the frozen designs
// it knows pin for the queue's arms, else 1.
func (w *Worker) advertised(now time.Time) Advert {
	w.advertMu.Lock()
	known := maps.Clone(w.designSlots)
	runningQueue := w.runningQueue
	w.advertMu.Unlock()
	running := w.Slots()
	a := Advert{Worker: w.opts.ID, Slots: map[string]int{}, At: now.UTC()}
	w.pollMu.Lock()
	defer w.pollMu.Unlock()
	for _, q := range w.opts.Queues {
		if _, ok := w.refused[q]; ok {
			continue
		}
		switch {
		case q == runningQueue:
			a.Slots[q] = running
		case known[q] > 0:
			a.Slots[q] = known[q]
		default:
			a.Slots[q] = 1
		}
	}
	return a
}

// knowDesign notes a frozen design's slots per queue for the advertisement.
func (w *Worker) knowDesign(snap *studies.Snapshot) {
	ds := designSlots(snap)
	w.advertMu.Lock()
	defer w.advertMu.Unlock()
	if w.designSlots == nil {
		w.designSlots = map[string]int{}
	}
	for q, n := range ds {
		w.designSlots[q] = max(w.designSlots[q], n)
	}
}

// advertise rewrites the worker's advertisement when it changed or is due;
// withdraw removes it. Both run on Run's goroutine only.
func (w *Worker) advertise(now time.Time) {
	a := w.advertised(now)
	if maps.Equal(a.Slots, w.lastAdvert.Slots) && now.Sub(w.lastAdvert.At) < advertEvery {
		return
	}
	if err := writeAdvert(w.opts.Config.Spool, a); err != nil {
		w.log.Warn("cannot advertise its slots in the spool: the coordinator counts this worker's queues as unserved", "worker", w.opts.ID,
			"path", advertPath(w.opts.Config.Spool, w.opts.ID), "err", err)
		return
	}
	if !maps.Equal(a.Slots, w.lastAdvert.Slots) {
		w.log.Info("advertises its slots", "worker", w.opts.ID, "slots", a.Slots)
	}
	w.lastAdvert = a
}

func (w *Worker) withdraw() {
	if w.lastAdvert.Worker == "" {
		return
	}
	if err := removeAdvert(w.opts.Config.Spool, w.opts.ID); err != nil {
		w.log.Warn("cannot withdraw its advertisement from the spool: it counts until it is stale", "worker", w.opts.ID, "err", err, "stale_after", advertFresh)
	}
	w.lastAdvert = Advert{}
}
