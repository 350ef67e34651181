package scaleout

import (
	"testing"
	"time"

	"rig/receipts"
	"rig/run"
)

// After a daemon restart its follower is told at once of the trials that
// finished while it was down (their merges had waited on the engine): they
// are done, but they are not a rate. Before, they counted as trials done
// since following began, and merged in its first second they made a rate
// of hundreds a minute ("369.8/min, ETA 11s" in issue 36).
func TestHandleRateIsOfTrialsFinishedSinceFollowing(t *testing.T) {
	start := time.Now().UTC().Add(-30 * time.Second)
	h := &Handle{info: run.ExecInfo{Planned: 10, StartedAt: start, Workers: map[string]int{}}}
	rec := func(task string, finished time.Time) receipts.Receipt {
		return receipts.Receipt{Arm: "a", JobKind: "qa", TaskID: task, Repeat: 1, Attempt: 1, Outcome: receipts.Scored, FinishedAt: finished,
			Pins: map[string]string{"worker": "w1"}}
	}
	for _, task := range []string{"t1", "t2", "t3"} {
		h.note(rec(task, start.Add(-2*time.Minute))) // finished while the daemon was down
	}
	if info := h.Info(); info.Done != 3 || info.RatePerMin != 0 || info.ETA != "" {
		t.Errorf("after the backlog: done %d, %.1f/min, ETA %q; want 3 done and no rate yet", info.Done, info.RatePerMin, info.ETA)
	}
	h.note(rec("t4", time.Now().UTC()))
	info := h.Info()
	// One trial in about 30 s: about 2 a minute, 6 left at that pace.
	if info.Done != 4 || info.RatePerMin < 1.5 || info.RatePerMin > 2.1 {
		t.Errorf("after a trial finished while followed: done %d, %.2f/min; want 4 done at about 2/min", info.Done, info.RatePerMin)
	}
	if eta, err := time.ParseDuration(info.ETA); err != nil || eta < 2*time.Minute || eta > 4*time.Minute {
		t.Errorf("ETA %q (%v); want about 3 minutes for 6 trials at 2/min", info.ETA, err)
	}
}
