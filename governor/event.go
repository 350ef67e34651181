package governor

import (
	"context"
	"log/slog"
	"time"
)

// EventKind names what happened.
type EventKind string

// Event kinds the governor emits.
const (
	EventTrip       EventKind = "trip"        // a policy became violated
	EventClear      EventKind = "clear"       // a policy cleared
	EventPreempt    EventKind = "preempt"     // a trial was preempted: mark it, do not score it, rerun it
	EventStopped    EventKind = "stopped"     // a preempted trial's runtime is gone
	EventStopFailed EventKind = "stop-failed" // it could not be stopped
	EventHold       EventKind = "hold"        // the gate closed
	EventRelease    EventKind = "release"     // the gate opened
	EventStale      EventKind = "heartbeat-stale"
	EventFresh      EventKind = "heartbeat-fresh"
)

// Event is one governor event. Every event goes to the study store and the
// daemon log through an EventSink.
type Event struct {
	At       time.Time `json:"at"`
	Kind     EventKind `json:"kind"`
	TrialID  string    `json:"trial_id,omitempty"`
	Policy   string    `json:"policy,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Readings []Reading `json:"readings,omitempty"`
	Err      string    `json:"err,omitempty"`
}

// EventSink receives governor events. Emit is called from the governor's
// goroutines and must not block for long; an error is logged, not retried.
type EventSink interface {
	Emit(ctx context.Context, e Event) error
}

// SlogSink writes events to a structured logger.
type SlogSink struct{ Logger *slog.Logger }

// Emit implements EventSink.
func (s SlogSink) Emit(ctx context.Context, e Event) error {
	lvl := slog.LevelInfo
	switch e.Kind {
	case EventPreempt, EventStopFailed, EventStale, EventTrip:
		lvl = slog.LevelWarn
	}
	s.Logger.Log(ctx, lvl, "governor "+string(e.Kind), "trial", e.TrialID, "policy", e.Policy, "reason", e.Reason, "err", e.Err)
	return nil
}

// Sinks fans an event out to several sinks; the first error is returned
// after all have been tried.
type Sinks []EventSink

// Emit implements EventSink.
func (ss Sinks) Emit(ctx context.Context, e Event) error {
	var first error
	for _, s := range ss {
		if err := s.Emit(ctx, e); err != nil && first == nil {
			first = err
		}
	}
	return first
}
