package scaleout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"rig/receipts"
)

// A lost attempt is one no worker returned: its worker was killed or cut
// off (the engine's heartbeat timeout), or failed without a receipt. Its
// receipt says what is known of it (on which worker it ran, since when),
// and the entry its worker left half-written in the spool is removed. An
// attempt whose worker did finish, its result held up by an engine outage,
// is not one: the worker keeps and reports the result (outbox.go), and the
// coordinator merges the entry instead (Coordinator.RecordLost).

// attemptBeat is a trial activity's heartbeat detail: which worker runs the
// attempt and since when. The engine keeps the last one it received, so the
// workflow still knows both when the worker is gone.
type attemptBeat struct {
	Key     string    `json:"key"`
	Worker  string    `json:"worker"`
	Started time.Time `json:"started"`
	// Slots is how many trials the worker took at once when the attempt
	// began (its arm's pins.slots): what it advertises to the engine.
	Slots int `json:"slots,omitempty"`
}

// lostSeen is what the workflow knows of a trial attempt that failed with
// err, scheduled at scheduled: the worker and its start from the attempt's
// last heartbeat (a worker killed or cut off), else the worker the engine
// names as having failed it and the time the attempt was scheduled (the
// earliest it can have started). A worker killed before its first beat is
// not known: Worker is then empty.
func lostSeen(err error, scheduled time.Time) attemptBeat {
	seen := attemptBeat{Started: scheduled}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) && timeout.HasLastHeartbeatDetails() {
		// A worker of an older rig beat with the key alone: not decoded.
		if b, ok := lastBeat(timeout); ok && b.Worker != "" && !b.Started.IsZero() {
			return b
		}
	}
	var act *temporal.ActivityError
	if errors.As(err, &act) {
		seen.Worker = act.Identity()
	}
	return seen
}

// lastBeat decodes a timeout's last heartbeat detail. Details the SDK holds
// as values rather than payloads (an error made in this process) panic when
// their type differs; in a workflow a panic would fail its task, so it is
// a detail not decoded.
func lastBeat(timeout *temporal.TimeoutError) (b attemptBeat, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return b, timeout.LastHeartbeatDetails(&b) == nil
}

// noteLost puts what is known of a lost attempt on its receipt: the worker
// it ran on (the "worker" pin, as a merged receipt has) and when it started,
// so that its started_at is not its finished_at.
func noteLost(rec *receipts.Receipt, l LostAttempt) {
	if l.Worker != "" {
		rec.Pins["worker"] = l.Worker
	}
	if !l.Started.IsZero() && l.Started.Before(rec.FinishedAt) {
		rec.StartedAt = l.Started.UTC()
	}
}

// removePartial removes the half-written spool entries of a lost attempt
// (KEY#ATTEMPT.WORKER.partial, any worker's): the worker that wrote one was
// killed or cut off, so nothing will finish or remove it, and the attempt
// is now recorded lost. A worker still writing one is cut off and its
// result is not taken. What cannot be removed (another account's entry in
// a spool without a shared uid) is returned, for the log.
func removePartial(trials, key string, attempt int) (left []string) {
	prefix := strings.TrimSuffix(entryName(key, attempt, "x"), "x")
	ents, err := os.ReadDir(trials)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, partial) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(trials, name)); err != nil {
			left = append(left, name+": "+err.Error())
		}
	}
	return left
}
