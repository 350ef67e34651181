// Package preflight decides, before any run, whether a model file fits a card
// profile: it reads GGUF metadata, predicts the peak memory of a run for a
// runtime, and returns a verdict of "fits" (with its margin) or "doesn't fit at
// this card". It also declares card profiles and enforces simulated cards with
// a memory-cgroup Reservation. It does not start runtimes (package runtimes
// does; preflight/bench measures this package's accuracy through it),
// schedule trials or store verdicts; callers own those.
package preflight
