package daemon

import (
	"context"
	"log/slog"

	"rig/governor"
	"rig/run/gates"
)

// storeSink sends every governor event to the running study's store and
// then to the daemon log. The store comes first so that an event the log
// shows is already durable when the daemon dies right after it.
type storeSink struct {
	svc *Service
	log *slog.Logger
}

func (s storeSink) Emit(ctx context.Context, e governor.Event) error {
	s.svc.Executions().RecordGovernorEvent(ctx, e.At, e.TrialID, string(e.Kind), e)
	_ = GovernorMetrics{s.svc.metrics}.Emit(ctx, e) // metrics (metrics.go)
	s.log.Info("governor", "kind", e.Kind, "trial", e.TrialID, "policy", e.Policy, "reason", e.Reason)
	return nil
}

// StartGovernor starts the daemon's governor in front of its study runs.
func StartGovernor(ctx context.Context, svc *Service, log *slog.Logger) (*gates.Gates, error) {
	return gates.Start(ctx, gates.Options{Home: svc.Home, Sink: storeSink{svc, log}, Log: log})
}
