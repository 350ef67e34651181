package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"rig/analysis"
	"rig/api"
	"rig/internal/atomicfile"
	"rig/receipts"
	"rig/studies"
)

// DecisionRecord is what `rig study decide` records (decision.json), in
// the protocol's own type: the file and the reply are the same record.
type DecisionRecord = api.DecisionRecord

// DecideRequest is `rig study decide`, as the protocol names it.
type DecideRequest = api.DecideRequest

// Decide evaluates the design's rule exactly as written on the execution's
// analysis and records the decision; citing a stale comparison is refused.
// Deciding marks every bank the study froze as used (see markBanksUsed).
// With req.Preview it runs every check and returns the record it would
// write, writing nothing.
func (rp Reports) Decide(ctx context.Context, req DecideRequest) (DecisionRecord, error) {
	return rp.decide(ctx, req, rp.Analyse)
}

// decide is Decide with the analysis it reads passed in.
func (rp Reports) decide(ctx context.Context, req DecideRequest, analyse func(ctx context.Context, name, execID string) (*Analysis, error)) (DecisionRecord, error) {
	actor, err := rp.decider(ctx, req)
	if err != nil {
		return DecisionRecord{}, err
	}
	req.Actor = actor
	var st *receipts.Store
	var body []byte
	if req.Key != "" {
		var err error
		if st, err = rp.s.store(req.Study); err != nil {
			return DecisionRecord{}, err
		}
		// The request as sent, less who sends it (as run's body is).
		body, _ = json.Marshal(studies.DecideBody{Study: req.Study, Execution: req.Execution, ReportHash: req.ComparisonHash, Rationale: req.Rationale})
		_, found, err := st.LookupIdempotency(ctx, req.Key, body)
		if err != nil {
			return DecisionRecord{}, decideKeyConflict(req.Key, err)
		}
		if found {
			if rec, ok, err := rp.recordedDecision(req.Study); err != nil || ok {
				return rec, err
			}
			// The key was claimed but the decision not recorded (the daemon
			// stopped between the two): decide now.
		}
	}
	rec, ev, err := rp.proposedDecision(ctx, req, analyse)
	if err != nil || req.Preview {
		return rec, err
	}
	if req.Key != "" {
		_, replay, err := st.ClaimIdempotency(ctx, req.Key, body, "decision of "+rec.Execution)
		if err != nil {
			return DecisionRecord{}, decideKeyConflict(req.Key, err)
		}
		if replay {
			if prev, ok, err := rp.recordedDecision(req.Study); err != nil || ok {
				return prev, err
			}
		}
	}
	return rp.recordDecision(ctx, rec, ev)
}

// decider is who decides: the caller, checked against the study's
// separation of duties before any analysis is read or key claimed.
func (rp Reports) decider(ctx context.Context, req DecideRequest) (string, error) {
	if req.Execution != "" {
		if _, err := rp.s.execution(req.Study, req.Execution); err != nil {
			return "", err
		}
	}
	actor, err := rp.s.actor(ctx, req.Actor)
	if err != nil {
		return "", err
	}
	if _, ok := CallerFrom(ctx); ok {
		l, err := rp.s.lifecycle(req.Study)
		if err != nil {
			return "", err
		}
		if err := rp.s.separateDuties(ctx, dutyDecide, "study "+req.Study, studyParties(l)); err != nil {
			return "", err
		}
	}
	return actor, nil
}

// proposedDecision is the record the rule gives on the analysis, checked
// as recording it will be (the cited hash, the lifecycle), and its event;
// it writes nothing, and with req.Preview the record is marked a preview.
func (rp Reports) proposedDecision(ctx context.Context, req DecideRequest, analyse func(ctx context.Context, name, execID string) (*Analysis, error)) (DecisionRecord, studies.Event, error) {
	a, err := analyse(ctx, req.Study, req.Execution)
	if err != nil {
		return DecisionRecord{}, studies.Event{}, err
	}
	if req.ComparisonHash == "" {
		return DecisionRecord{}, studies.Event{}, fmt.Errorf("decide: cite the comparison hash you read (rig study report %s prints it): --comparison %s", req.Study, a.Report.ComparisonHash)
	}
	if err := analysis.CheckHash(a.Input, req.ComparisonHash); err != nil {
		var stale *analysis.StaleHashError
		if errors.As(err, &stale) {
			stale.Flag = "--comparison"
		}
		return DecisionRecord{}, studies.Event{}, err
	}
	d := a.Report.Decision
	rec := DecisionRecord{Study: req.Study, Execution: a.Execution, Action: d.Action, Verdict: string(d.Verdict), Arm: d.Arm,
		NextBaseline: d.NextBaseline, Trace: d.Trace, ComparisonHash: d.ComparisonHash, Rationale: req.Rationale,
		Actor: req.Actor, ActorUID: callerUID(ctx), At: time.Now().UTC(), Preview: req.Preview}
	ev := studies.Event{Kind: studies.EventDecide, Actor: rec.Actor, ActorUID: rec.ActorUID, At: rec.At, Execution: a.Execution, Outcome: d.Action, Why: req.Rationale}
	// A decision the lifecycle refuses writes nothing: check it before the
	// key is claimed and the banks are marked.
	l, err := rp.s.lifecycle(req.Study)
	if err != nil {
		return DecisionRecord{}, studies.Event{}, err
	}
	if _, err := l.Apply(ev); err != nil {
		return DecisionRecord{}, studies.Event{}, err
	}
	return rec, ev, nil
}

// recordDecision writes the decision: the banks marked used, the lifecycle
// moved to decided, the publish proposal of a switch, and decision.json.
func (rp Reports) recordDecision(ctx context.Context, rec DecisionRecord, ev studies.Event) (DecisionRecord, error) {
	snap, err := rp.s.Snapshot(rec.Study)
	if err != nil {
		return DecisionRecord{}, err
	}
	// Marked before the study moves to decided: a failure after this locks
	// the versions without a decision (fail closed), never the reverse.
	if err := markBanksUsed(rec.Study, snap, rec.At); err != nil {
		return DecisionRecord{}, err
	}
	if _, err := rp.s.apply(ctx, rec.Study, ev); err != nil {
		return DecisionRecord{}, err
	}
	// A switch to the challenger proposes it as the next baseline; the
	// record names the proposal, so the proposal is written first.
	if (rec.Verdict == string(analysis.Accept) || rec.Verdict == string(analysis.Ship)) && rec.Arm != "" {
		_, design, err := rp.s.frozen(rec.Study)
		if err != nil {
			return DecisionRecord{}, err
		}
		p, err := rp.s.Proposals().propose(rec, snap, design)
		if err != nil {
			return DecisionRecord{}, fmt.Errorf("writing the publish proposal of the decision: %w", err)
		}
		rec.Proposal = p.ID
	}
	sd, err := rp.s.study(rec.Study)
	if err != nil {
		return DecisionRecord{}, err
	}
	if err := atomicfile.WriteJSON(sd.Decision(), rec, 0o400); err != nil {
		return DecisionRecord{}, err
	}
	return rec, nil
}

func (rp Reports) decision(name string) (DecisionRecord, error) {
	var rec DecisionRecord
	sd, err := rp.s.study(name)
	if err != nil {
		return rec, err
	}
	err = atomicfile.ReadJSON(sd.Decision(), &rec)
	return rec, err
}

// recordedDecision is the study's decision; ok is false when none is recorded.
func (rp Reports) recordedDecision(name string) (rec DecisionRecord, ok bool, err error) {
	rec, err = rp.decision(name)
	if errors.Is(err, os.ErrNotExist) {
		return DecisionRecord{}, false, nil
	}
	if err != nil {
		return DecisionRecord{}, false, err
	}
	return rec, true, nil
}

// decideKeyConflict makes the store's refusal of a key reused with another
// request an error matching studies.ErrIdempotencyConflict.
func decideKeyConflict(key string, err error) error {
	var ce *receipts.ConflictError
	if errors.As(err, &ce) && ce.What == "idempotency key" {
		return fmt.Errorf("decide --key %q: %w: %w", key, studies.ErrIdempotencyConflict, err)
	}
	return err
}
