package daemon

import (
	"context"
	"log/slog"

	"rig/governor"
	"rig/internal/metrics"
	"rig/preflight"
	"rig/receipts"
)

// This file wires the daemon into package metrics (docs/scale-out.md,
// "Metrics"): what it records where it already sees the event, and the two
// pieces a worker shares with it (the governor's events, the card).

// outcomes are the receipt's outcome classes, and governorEvents the
// governor's event kinds: the label values of rig's metrics that belong to
// receipts and governor, which package metrics does not import. A test
// holds them to the constants they copy.
var (
	outcomes       = []receipts.Outcome{receipts.Scored, receipts.Capped, receipts.FailedAtCard, receipts.Preempted, receipts.Error}
	governorEvents = []governor.EventKind{governor.EventTrip, governor.EventClear, governor.EventPreempt, governor.EventStopped,
		governor.EventStopFailed, governor.EventHold, governor.EventRelease, governor.EventStale, governor.EventFresh}
)

// NewMetrics is the metrics.Set of the daemon or of a worker (role), with
// each outcome's and each governor event's series at 0 from the start, so
// that the first preemption after a start is an increase an alert sees.
func NewMetrics(role metrics.Role) *metrics.Set {
	var k metrics.Known
	for _, o := range outcomes {
		k.Outcomes = append(k.Outcomes, string(o))
	}
	for _, e := range governorEvents {
		k.GovernorEvents = append(k.GovernorEvents, string(e))
	}
	return metrics.New(role, k)
}

// GovernorMetrics is a governor.EventSink that counts each event by kind
// and follows the hold: the daemon's and every worker's governor send their
// events here as well as to their store or log.
type GovernorMetrics struct{ M *metrics.Set }

// Emit implements governor.EventSink.
func (g GovernorMetrics) Emit(_ context.Context, e governor.Event) error {
	g.M.GovernorEvent(string(e.Kind))
	switch e.Kind {
	case governor.EventHold:
		g.M.Hold(true)
	case governor.EventRelease:
		g.M.Hold(false)
	}
	return nil
}

// WatchFaultPass reads, at each scrape of m, when the newest passing run
// of the fault suite in the governor's state folder stateDir started: what
// an alert compares with the 24 hours a pass is valid for
// (deploy/prometheus/rig-alerts.yaml), before counted trials are refused.
func WatchFaultPass(m *metrics.Set, stateDir string) {
	if m == nil {
		return
	}
	m.OnScrape(func() {
		r, err := governor.LastPass(stateDir)
		if err != nil {
			r = governor.Record{} // none, or unreadable: both leave the gate shut
		}
		m.FaultPass(r.At)
	})
}

// WatchCard samples NVIDIA card index at each scrape of m: its memory in
// use and in all, its power and its energy counter, labelled as DCGM's
// exporter labels the same card (gpu, UUID). Without NVML it samples
// nothing and says so; the card's metrics are then absent, never zero.
// The sampler reads its own NVML handle, never the governor's, so a scrape
// cannot disturb the governor's per-trial readings.
func WatchCard(ctx context.Context, m *metrics.Set, index int, log *slog.Logger) {
	if m == nil {
		return
	}
	nv, err := governor.OpenNVML(ctx, index)
	if err != nil {
		log.Info("metrics: no card to sample (the rig_card_* metrics are absent)", "card", index, "reason", err)
		return
	}
	go func() { <-ctx.Done(); nv.Close() }()
	uuid := ""
	if cards, err := preflight.RealCards(ctx); err == nil && index < len(cards) {
		uuid = cards[index].UUID
	}
	m.OnScrape(func() {
		if ctx.Err() != nil {
			return
		}
		r, err := nv.Read(ctx)
		if err != nil {
			log.Warn("metrics: reading the card", "card", index, "err", err)
			return
		}
		c := metrics.CardSample{Index: index, UUID: uuid}
		c.UsedBytes, _ = r.Value(governor.KeyCardMemBytes)
		c.TotalBytes, _ = r.Value(governor.KeyCardTotalBytes)
		c.PowerWatts, _ = r.Value(governor.KeyPowerW)
		c.EnergyJoule, c.HasEnergy = r.Value(governor.KeyEnergyJ)
		m.CardSample(c)
	})
}

// receiptStored counts a receipt the daemon's own runner stored (the
// engine's are counted as the coordinator merges them).
func (s *Service) receiptStored(rec receipts.Receipt) {
	s.metrics.TrialFinished(string(rec.Outcome), float64(rec.WallMS)/1000)
}

// queueDepths is, per runner ("local", or the engine's name), the planned
// trials of the running executions that are not done yet.
func (s *Service) queueDepths() map[string]int {
	s.mu.Lock()
	hs := make([]execHandle, 0, len(s.running))
	for _, h := range s.running {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	depth := map[string]int{}
	for _, h := range hs {
		info := h.Info()
		if info.Status != string(receipts.Running) {
			continue
		}
		q := info.Engine
		if q == "" {
			q = metrics.QueueLocal
		}
		if left := info.Planned - info.Done; left > 0 {
			depth[q] += left
		}
	}
	return depth
}

// startMetrics serves the daemon's metrics at opts.Metrics (nothing when it
// is empty or off) and hands the same Set to the engine, so that its
// merges and the receipts they store are counted. It runs before the
// governor starts, so that the governor's first hold is counted.
func (s *Service) startMetrics(ctx context.Context, opts Options, log *slog.Logger) error {
	if opts.Metrics == "" || opts.Metrics == metrics.Off {
		return nil
	}
	m := NewMetrics(metrics.Daemon)
	if _, err := m.Start(ctx, opts.Metrics, opts.MetricsDefault, log); err != nil {
		return err
	}
	s.metrics = m
	if opts.Engine != nil {
		opts.Engine.Metrics = m
	}
	m.OnScrape(func() { m.QueueDepths(s.queueDepths()) })
	WatchFaultPass(m, governor.DefaultStateDir())
	WatchCard(ctx, m, 0, log)
	return nil
}
