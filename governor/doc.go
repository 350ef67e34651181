// Package governor keeps local model runs safe: it reads sensors (GPU through
// NVML, host through gopsutil, the runtime's cgroup, token progress), checks
// them against policies with hysteresis, preempts the running trial when one
// is violated, holds the queue until conditions clear, and publishes a
// watchdog heartbeat. It reads the dated fault-suite record (Record,
// LastPass) that gates counted runs.
//
// It does not schedule trials, score them or own the study store: callers
// hand it a Trial to stop, an EventSink to record into, and ask its Gate
// before starting work. It starts no runtime: the fault-injection suite that
// drives a real llama-server and writes the record is governor/faults.
package governor
