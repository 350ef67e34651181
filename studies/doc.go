// Package studies is a model-comparison study as data, from its design file
// to its frozen snapshot: parsing and validating the design, the published
// JSON Schema, the canonical form and content hashes, registration, the
// content-addressed freeze, the lifecycle state machine, the interleaved
// trial plan, harness caps and the dry-run price. It executes nothing and
// stores nothing: it imports none of runtimes, receipts, genrecord or
// governor. Executions are run's, the resident service is daemon's,
// the statistics are analysis's and the report report's.
package studies
