// Package studies is a model-comparison study as data, from its design file
// to its frozen snapshot: parsing and validating the design, the published
// JSON Schema, the canonical form and content hashes, registration, the
// content-addressed freeze, the lifecycle state machine, the interleaved
// trial plan, harness caps and the dry-run price. It executes nothing and
// stores nothing: it imports none of runtimes, receipts, genrecord or
// governor, nor run, analysis, report, scaleout, daemon or api, which are
// built on it. Executions are run's, the resident service is daemon's,
// the statistics are analysis's and the report report's. Where a design
// meets the statistics, studies keeps the design's own words (stopping
// methods, guardrail metrics, receipt fields) and the package that imports
// both joins them: run converts the stopping rule for the monitor and
// prices it in the dry run, report/findings hands the guardrails to the
// analysis, and their tests hold the words to analysis's.
package studies
