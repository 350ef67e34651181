// Package studies is a model-comparison study as data, from its design file
// to its frozen snapshot: parsing and validating the design, the published
// JSON Schema, the canonical form and content hashes, registration, the
// content-addressed freeze, the lifecycle state machine, the interleaved
// trial plan, harness caps and the dry-run price. It executes nothing and
// stores nothing: it imports none of runtimes, receipts, genrecord or
// governor. Executions are studies/run's, the resident service is daemon's,
// the statistics are studies/analysis's and the report studies/report's.
package studies
