// Package tasks holds the task banks of a study: the JSONL bank format and
// its content hash, lint and key audits, hold-out handling, the named and
// versioned graders, blinding for judges and human reviewers, and leakage
// checks against what candidates see or will train on.
//
// It does not decide anything: graders return numbers and the design owns
// thresholds, the analysis owns verdicts. It does not start runtimes either;
// the code grader runs tests through an injected Runner so the caller can
// place it inside the sandbox.
package tasks
