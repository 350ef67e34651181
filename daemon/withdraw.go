package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"rig/studies"
)

// Withdraw takes a study back before its first counted run: its state
// becomes withdrawn, audited with the reason, and nothing more is done under
// its name. The registrant may withdraw their own study, and a Director any
// study; the name stays taken, so the design goes again under a new name.
func (sr Studies) Withdraw(ctx context.Context, name, actor, why string) (StudyInfo, error) {
	actor, err := sr.s.actor(ctx, actor)
	if err != nil {
		return StudyInfo{}, err
	}
	l, err := sr.s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	if err := sr.mayWithdraw(ctx, name, l); err != nil {
		return StudyInfo{}, err
	}
	if _, err := sr.s.apply(ctx, name, studies.Event{Kind: studies.EventWithdraw, Actor: actor, At: time.Now().UTC(), Why: why}); err != nil {
		return StudyInfo{}, err
	}
	sr.s.Log.Info("study withdrawn", "study", name, "actor", actor)
	return sr.Status(ctx, name)
}

// mayWithdraw is the one rule of who withdraws: a Director, or whoever
// registered the study (compared by uid, as separation of duties compares
// people). Under the single-user policy the one user holds every role; a
// call inside the daemon's process has no caller and is not refused.
func (sr Studies) mayWithdraw(ctx context.Context, name string, l *studies.Lifecycle) error {
	c, ok := CallerFrom(ctx)
	if !ok || sr.s.Access().Policy().Single() || slices.Contains(sr.s.Access().Policy().RolesOf(c), RoleDirector) {
		return nil
	}
	var registrants []string
	for _, p := range studyParties(l) {
		if p.part != partRegistered {
			continue
		}
		if p.known && p.uid == c.UID || !p.known && (p.who == c.String() || p.who == c.User) {
			return nil
		}
		registrants = append(registrants, p.who)
	}
	return fmt.Errorf("%w: %s may not withdraw study %s: only its registrant (%v) or a Director may", ErrForbidden, c, name, registrants)
}
