package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
)

// recoverPreemptions writes the receipt a preemption never got. The governor
// stores its preempt event before it stops the runtime; a daemon killed in
// between leaves an event naming call KEY#N and no receipt for attempt N.
// Without this, the rerun would reuse attempt N and no receipt would say
// that call was preempted. Each such call gets its Preempted receipt (never
// counted), so the rerun becomes N+1 with parent N.
func (x *execution) recoverPreemptions(ctx context.Context) error {
	events, err := x.store.GovernorEvents(ctx)
	if err != nil {
		return err
	}
	for _, ev := range events {
		if ev.ExecutionID != x.exec.ID || ev.Kind != "preempt" || ev.Trial == "" {
			continue
		}
		keyText, n, ok := strings.Cut(ev.Trial, "#")
		if !ok {
			continue
		}
		attempt, err := strconv.Atoi(n)
		if err != nil || attempt < 1 {
			continue
		}
		key, err := studies.ParseTrialKey(keyText)
		if err != nil {
			continue
		}
		arm := x.design.Arm(key.Arm)
		if arm == nil {
			continue
		}
		rk := receiptTrial(key)
		if _, err := x.store.Receipt(ctx, x.exec.ID, rk, attempt); err == nil {
			continue
		} else if !errors.Is(err, receipts.ErrNotFound) {
			return err
		}
		next, parent, err := x.store.NextAttempt(ctx, x.exec.ID, rk)
		if err != nil {
			return err
		}
		if next != attempt {
			// A later attempt already exists: the call is history the
			// receipts cannot take back in order; the event stays as its record.
			continue
		}
		var why struct {
			Policy string `json:"policy"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Detail, &why)
		rec := x.newReceipt(*arm, key, attempt, parent, runtimes.Pins{})
		rec.StartedAt, rec.FinishedAt = ev.At, ev.At
		rec.Outcome = receipts.Preempted
		rec.Detail = fmt.Sprintf("preempted by the governor: %s: %s (receipt written on resume from governor event #%d: the daemon stopped before it wrote one)", why.Policy, why.Reason, ev.Seq)
		if err := x.store.PutReceipt(ctx, rec); err != nil {
			return err
		}
		x.env.Log.Info("recorded a preemption the daemon did not live to record", "trial", ev.Trial, "event", ev.Seq)
	}
	return nil
}
