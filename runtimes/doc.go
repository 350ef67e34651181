// Package runtimes starts and drives the real model runtimes rig compares
// models in (llama-server, Ollama, and Aider on top of either), each inside a
// loopback-only sandbox, and records the pins of what actually ran: model and
// binary digests, every shared library loaded, build flags and the machine line.
// It is the one place that says which binary and build a runtime runs (Build)
// and the one launcher of llama-server and Ollama: trials, replays, the
// preflight bench and the governor's fault harness all start them here, so one
// build always records one Stack. It does not decide anything about a study;
// it runs one call and reports tokens, top-K log-probabilities, timings and
// peak memory truthfully.
package runtimes
