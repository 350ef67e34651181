// Package daemon is rig's resident service, one per machine: every study
// registered under RIG_HOME, its lifecycle, the gates before counted runs
// (preflight, validation, the governor), executions (hosted through
// run), reports, decisions and re-grades; and the unix-socket server
// the command line calls: one type per resource (Studies, Executions,
// Reports, Proposals, Budget, Access, and Tries for rig try with its warm
// runtimes) serves its requests over the shared
// core, Service, and answers in the types of package api (the protocol, its
// typed client and its error codes live there). It owns the card: Run takes
// the machine-wide lock and starts the governor; entry.go holds the other
// processes the command line starts in-process (a worker, the engine's dev
// server). It is not the runner (run executes trials), nor the
// study's data (studies), nor the command line (cmd/rig only parses flags
// and prints).
package daemon
