// Package memory is `rig bench preflight`: how well the preflight's
// memory model predicts, measured against real peaks. It runs each
// provisioned model on the real llama-server and Ollama, each start inside a
// fresh memory reservation and through the runtime's own launcher (package
// runtimes), reads the true peak, and sets it beside rig's prediction,
// gguf-parser-go's and the runtime's own estimate; with Fit it fits the
// calibration constants the preflight uses. Every row records the runtime's
// Stack, the same pins a trial or a replay of that build records. Refit
// predicts and fits again from the tables of an earlier run; RunCard
// measures on a real NVIDIA card, through NVML.
//
// It is not the prediction (package preflight) and never decides whether a
// study's run fits; it is how the prediction's error is measured.
package memory
