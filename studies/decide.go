package studies

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"rig/studies/analysis"
)

// DecisionRecord is what `rig study decide` records: the outcome the
// pre-registered rule assigned, the logic that produced it, the actor and the
// comparison hash it cites.
type DecisionRecord struct {
	Study          string    `json:"study"`
	Execution      string    `json:"execution"`
	Action         string    `json:"action"`
	Verdict        string    `json:"verdict"`
	Arm            string    `json:"arm,omitempty"`
	NextBaseline   string    `json:"next_baseline"`
	Trace          []string  `json:"trace"`
	ComparisonHash string    `json:"comparison_hash"`
	Rationale      string    `json:"rationale"`
	Actor          string    `json:"actor"`
	At             time.Time `json:"at"`
}

// DecideRequest is `rig study decide`.
type DecideRequest struct {
	Study          string `json:"study"`
	Execution      string `json:"execution,omitempty"`
	ComparisonHash string `json:"comparison_hash"` // the hash the decider read; a stale one is refused
	Rationale      string `json:"rationale"`
	Actor          string `json:"actor"`
}

// Decide evaluates the design's rule exactly as written on the execution's
// analysis and records the decision; citing a stale comparison is refused.
func (s *Service) Decide(ctx context.Context, req DecideRequest) (DecisionRecord, error) {
	a, err := s.Analyse(ctx, req.Study, req.Execution)
	if err != nil {
		return DecisionRecord{}, err
	}
	if req.ComparisonHash == "" {
		return DecisionRecord{}, fmt.Errorf("decide: cite the comparison hash you read (rig study report %s prints it): --comparison %s", req.Study, a.Report.ComparisonHash)
	}
	if err := analysis.CheckHash(a.Input, req.ComparisonHash); err != nil {
		var stale *analysis.StaleHashError
		if errors.As(err, &stale) {
			stale.Flag = "--comparison"
		}
		return DecisionRecord{}, err
	}
	d := a.Report.Decision
	rec := DecisionRecord{Study: req.Study, Execution: a.Execution, Action: d.Action, Verdict: string(d.Verdict), Arm: d.Arm,
		NextBaseline: d.NextBaseline, Trace: d.Trace, ComparisonHash: d.ComparisonHash, Rationale: req.Rationale,
		Actor: orDefault(req.Actor, currentUser()), At: time.Now().UTC()}
	if _, err := s.apply(ctx, req.Study, Event{Kind: EventDecide, Actor: rec.Actor, At: rec.At, Execution: a.Execution, Outcome: d.Action, Why: req.Rationale}); err != nil {
		return DecisionRecord{}, err
	}
	if err := writeJSONAtomic(filepath.Join(s.Dir(req.Study), "decision.json"), rec, 0o400); err != nil {
		return DecisionRecord{}, err
	}
	return rec, nil
}

func (s *Service) decision(name string) (DecisionRecord, error) {
	var rec DecisionRecord
	err := readJSON(filepath.Join(s.Dir(name), "decision.json"), &rec)
	return rec, err
}
