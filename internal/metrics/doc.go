// Package metrics holds every Prometheus metric rig exports and the small
// HTTP endpoint that serves them (/metrics, on loopback unless told
// otherwise), for the daemon and for each `rig worker`. Callers record what
// happened through typed functions (TrialStarted, TrialFinished,
// GovernorEvent, CardSample, MergeObserved, …); the names, labels, units and
// buckets live here and nowhere else, so a dashboard has one page to read
// (docs/scale-out.md, "Metrics"). Each process exports its role's metrics
// (New(Daemon, …) or New(Worker, …)), each series known up front at 0.
//
// It is not a sensor and decides nothing: it reads no card, store or
// governor itself, and no leaf package (governor, runtimes, receipts, …)
// imports it; the daemon, the worker and the engine record into it where
// they already see the event. It imports nothing of rig's.
package metrics
