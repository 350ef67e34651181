// Package preflight decides, before any run, whether a model file fits a card
// profile: from the GGUF header (read by internal/gguf) it takes the model's
// shapes, predicts the peak memory of a run for a runtime, and returns a
// verdict of "fits" (with its margin) or "doesn't fit at this card". It also
// declares card profiles. It does not read GGUF bytes itself (internal/gguf
// does), make the memory cgroup that enforces a simulated card
// (internal/cgroup's Reservation does), start runtimes (package runtimes does;
// bench/memory, `rig bench preflight`, measures this package's accuracy
// through it), schedule trials or store verdicts; callers own those.
package preflight
