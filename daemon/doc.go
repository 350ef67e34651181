// Package daemon is rig's resident service, one per machine: every study
// registered under RIG_HOME, its lifecycle, the gates before counted runs
// (preflight, validation, the governor), executions (hosted through
// studies/run), reports, decisions and re-grades; the unix-socket server the
// command line calls, its client, and the request and reply types, with
// errors that keep their class across the socket. It owns the card: Run
// takes the machine-wide lock and starts the governor. It is not the runner
// (studies/run executes trials), nor the study's data (studies), nor the
// command line (cmd/rig only parses flags and prints).
package daemon
