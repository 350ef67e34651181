package daemon

import (
	"context"
	"fmt"
	"time"

	"rig/api"
	"rig/studies"
)

// AmendDecisionRequest is `rig study amend-decision`, as the protocol names it.
type AmendDecisionRequest = api.AmendDecisionRequest

// AmendDecision appends a correction, with its own rationale and actor, to
// the study's recorded decision: decision.json stays as it was written, and
// the amendment goes in the lifecycle and its audit, in one transaction. It
// is a Director's step under the same separation of duties as deciding.
// With req.Preview it runs every check and returns the amendment it would
// append, writing nothing.
func (rp Reports) AmendDecision(ctx context.Context, req AmendDecisionRequest) (api.DecisionAmendment, error) {
	actor, err := rp.s.actor(ctx, req.Actor)
	if err != nil {
		return api.DecisionAmendment{}, err
	}
	l, err := rp.s.lifecycle(req.Study)
	if err != nil {
		return api.DecisionAmendment{}, err
	}
	if _, ok := CallerFrom(ctx); ok {
		if err := rp.s.separateDuties(ctx, dutyAmend, "study "+req.Study, studyParties(l)); err != nil {
			return api.DecisionAmendment{}, err
		}
	}
	rec, ok, err := rp.recordedDecision(req.Study)
	if err != nil {
		return api.DecisionAmendment{}, err
	}
	if !ok {
		return api.DecisionAmendment{}, &studies.TransitionError{From: l.State, Event: studies.EventAmend,
			Msg: fmt.Sprintf("study %q has no recorded decision to amend (record it first: rig study decide %s --comparison HASH --rationale TEXT)", req.Study, req.Study)}
	}
	ev := studies.Event{Kind: studies.EventAmend, Actor: actor, ActorUID: callerUID(ctx), At: time.Now().UTC(), Execution: rec.Execution, Why: req.Rationale}
	if req.Preview {
		// The lifecycle checks the amendment as recording it will.
		if _, err := l.Apply(ev); err != nil {
			return api.DecisionAmendment{}, err
		}
		out := apiAmendment(req.Study, l.Amendments[len(l.Amendments)-1])
		out.Preview = true
		return out, nil
	}
	after, err := rp.s.apply(ctx, req.Study, ev)
	if err != nil {
		return api.DecisionAmendment{}, err
	}
	return apiAmendment(req.Study, after.Amendments[len(after.Amendments)-1]), nil
}

// amendments are the corrections appended to the study's decision, oldest
// first; none when the study has none or its lifecycle does not read.
func (rp Reports) amendments(name string) []studies.Amendment {
	l, err := rp.s.lifecycle(name)
	if err != nil {
		return nil
	}
	return l.Amendments
}

func apiAmendment(study string, a studies.Amendment) api.DecisionAmendment {
	return api.DecisionAmendment{Study: study, Seq: a.Seq, Execution: a.Execution, DecidedAt: a.DecidedAt,
		Rationale: a.Rationale, Actor: a.Actor, ActorUID: a.ActorUID, At: a.At}
}
