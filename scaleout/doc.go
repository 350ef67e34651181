// Package scaleout spreads one frozen study's trials over many machines
// through Temporal, a durable workflow engine: the coordinator (the daemon
// that owns the study's store) submits the execution as a workflow, each
// trial is an activity on a task queue named by the runtime build and card
// class it needs, and `rig worker` processes on the GPU machines pull those
// activities, run each trial with the same runner, sandbox and governor a
// local run uses (run.Host), and leave the receipt and the trial's
// generation record in a spool. The coordinator merges the spool into the
// store exactly once per trial key and attempt.
//
// It is not a scheduler: ordering, retries, timeouts and durability are
// Temporal's. It does not decide anything about a study (the daemon does),
// and it carries no generation rows through Temporal: only small results
// travel, and the evidence moves through the spool (see docs/scale-out.md).
package scaleout
