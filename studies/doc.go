// Package studies holds a model-comparison study from its design file to its
// decision: parsing and validating the design, the published JSON Schema, the
// content-addressed freeze, the study's state machine, the interleaved trial
// plan and the dry-run price. It decides nothing about how a trial is executed
// or stored: runtimes, receipts, licences, tasks and preflight are reached
// through the small interfaces declared here, and the statistics live in
// studies/analysis.
package studies
