// Package genrecord writes, reads and replays generations.jsonl, the
// generation record: one header line with the run's pins, then one row per
// kept model call with the chosen tokens and their top-K log-probabilities.
// The record is evidence that a kept output came from the pinned model; the
// replay engine re-scores rows through a Rescorer and compares log-probs.
// It does not talk to any runtime itself: drivers implement Rescorer, and
// studies decide which calls are kept.
package genrecord
