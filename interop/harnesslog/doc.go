// Package harnesslog reads other evaluation harnesses' per-sample logs
// (lm-evaluation-harness's --log_samples JSONL, Inspect AI's eval logs,
// promptfoo's output) into one shape, pairs two of them by task, and runs
// rig's paired analysis on the pairs (package analysis: Wilson intervals,
// Tango's paired interval, exact McNemar, Holm, P(best), the detectable
// difference). What it gives is imported evidence: nothing was run, there
// are no receipts to check, no records to replay and no decision to record.
// It is not a bank importer (`rig tasks import` turns datasets into banks)
// and writes no harness's format (interop/inspectlog writes Inspect logs).
package harnesslog
