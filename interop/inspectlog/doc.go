// Package inspectlog writes an execution of a rig study as Inspect AI eval
// logs (the `.eval` zip its viewer, its log reader and its dataframes open),
// one log per arm × job kind, so a studio that keeps its results in Inspect
// can see rig's trials beside its own. It is a pure translation of evidence
// rig already holds (receipts, generation records, the frozen design and its
// banks) into Inspect's schema, plus the one deterministic, atomic writer of
// the zip; it runs nothing, grades nothing and computes no statistics beyond
// the ranking measure's mean and its interval from analysis. It is not a
// reader of Inspect logs: `rig compare --from inspect` reads them through
// interop/harnesslog.
package inspectlog
