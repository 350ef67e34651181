package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"rig/daemon"
	"rig/internal/metrics"
)

// metricsFlag adds --metrics, the address /metrics is served on, to a
// command whose default is def (loopback).
func metricsFlag(cmd *cobra.Command, def string) {
	cmd.Flags().String("metrics", def, "serve Prometheus metrics at http://HOST:PORT/metrics (loopback by default; another address only when named here; off: none). See docs/scale-out.md, Metrics")
}

// metricsAddr is --metrics and whether it is the default (a default whose
// port is taken gives way to a free loopback port; a named one fails).
func metricsAddr(cmd *cobra.Command) (addr string, isDefault bool) {
	addr, _ = cmd.Flags().GetString("metrics")
	return addr, !cmd.Flags().Changed("metrics")
}

// workerMetrics is the worker's Set, nil with --metrics off; its address is
// checked now, before the worker dials anything.
func workerMetrics(cmd *cobra.Command) (*metrics.Set, error) {
	addr, _ := metricsAddr(cmd)
	if addr == "" || addr == metrics.Off {
		return nil, nil
	}
	if _, err := metrics.CheckAddr(addr); err != nil {
		return nil, err
	}
	return daemon.NewMetrics(metrics.Worker), nil
}

// serveWorkerMetrics serves a worker's metrics and /healthz until ctx ends
// (ready is the worker's: nil while it polls): its trial
// attempts (through the engine's client, scaleout.Config.Metrics), its
// governor (daemon.GovernorMetrics, given to its gates), its card, and its
// state, read at each scrape from its governor and its running trials.
func serveWorkerMetrics(ctx context.Context, cmd *cobra.Command, m *metrics.Set, ready func(context.Context) error, log *slog.Logger) error {
	if m == nil {
		return nil
	}
	m.OnScrape(func() {
		switch {
		case m.InFlight() > 0:
			m.WorkerState(metrics.StateRunning)
		case ready(ctx) != nil:
			m.WorkerState(metrics.StateHeld)
		default:
			m.WorkerState(metrics.StateIdle)
		}
	})
	// /healthz beside /metrics: 200 while the worker polls, 503 with every
	// check it fails (docs/scale-out.md, A worker's checks).
	m.Handle("GET /healthz", metrics.HealthHandler(ready))
	card, _ := cmd.Flags().GetInt("card") // rig worker --card: the card this worker runs on
	daemon.WatchCard(ctx, m, card, log)
	addr, isDefault := metricsAddr(cmd)
	_, err := m.Start(ctx, addr, isDefault, log)
	return err
}
