// Package faults is the governor's fault-injection suite and soak: it wires
// a governor to simulated sensors, a real llama-server started through the
// runtime's own launcher, a cgroup file tree and a trial ledger; injects each
// fault class (over-temperature, a SIGSTOPped or killed runtime, a full disk
// while writing the record, ...); checks that the trial was preempted, marked
// not scored and rerun within the goal; and stores the dated record
// (governor.Record) whose last pass gates counted runs.
//
// It is for `rig governor faults` and `rig governor soak` and the nightly
// job. It is not the governor (package governor, which a trial runs under
// and which imports no runtime), and it runs no study trial: its ledger only
// mirrors the study store's marking so the suite can check it alone.
package faults
