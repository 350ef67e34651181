// Package speed is `rig bench runtimes`: the same GGUF on llama-server and
// Ollama (every provisioned runtime), same threads, context and sampling,
// calls interleaved across runtimes over several repetitions, measured as
// llama-bench measures (prompt tokens/s at 512 tokens, generation tokens/s
// at 128) plus time to first token, time per output token and peak memory.
// The runtimes' own timing fields are the source, checked against wall time.
// It tells a studio how the runtimes compare as built on this machine; it is
// not a study (no grading, no receipts) and decides nothing about a model.
package speed
