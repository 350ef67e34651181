// Package run executes one frozen study's execution: the plan's trials, each
// in its native runtime inside the sandbox and under the governor's watch,
// each ending in a receipt in the study's store and, when the runtime
// answered, rows in the execution's generation records; then the judge phase.
// It also makes the validation runs, and tries of a draft design (rig try:
// try.go), which run through the same trial runner into a sink that counts
// nothing. It needs only a small environment (Env:
// gates, log, sandbox choice, what is provisioned) and a Spec (snapshot,
// store, execution, directory), so any process can host it: the daemon today,
// a worker on another machine next. It is not the daemon: it keeps no study
// registry, no lifecycle and no socket, and it decides nothing about a study.
package run
