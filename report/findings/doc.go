// Package findings is the pure step from a study's stored evidence to what
// the analysis reads and what the report shows: the frozen design's decision
// rule becomes analysis clauses, the execution's receipts, grades, plan,
// preflight verdicts and kept outputs become analysis.Input, and the analysis
// with the rest of the study's record becomes report.Data.
//
// It is not for reading or writing anything: no files, no store, no runtime,
// no clock. The daemon reads the evidence (Evidence, Extras) and hands it in
// as values; a test builds the same values by hand.
package findings
