// Package analysis turns a study's trial results into the numbers a decision
// rests on: per-task scores, bootstrap intervals, P(best), exact paired tests
// with Holm, power, cost summaries, outcome classes and the evaluation of a
// pre-registered decision rule. It is pure computation over plain values: it
// reads no store, runs no model and draws no report, so the caller converts
// receipts into Trials and renders the returned Report. Every random choice is
// seeded from the design, so the same inputs give the same numbers.
package analysis
