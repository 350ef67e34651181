// Package bench measures how well the preflight predicts: it runs each
// provisioned model on the real llama-server and Ollama, each start inside a
// fresh memory reservation and through the runtime's own launcher (package
// runtimes), reads the true peak, and sets it beside rig's prediction,
// gguf-parser-go's and the runtime's own estimate; with Fit it fits the
// calibration constants the preflight uses. Every row records the runtime's
// Stack, the same pins a trial or a replay of that build records.
//
// It is not the prediction (package preflight) and never decides whether a
// study's run fits; it is how the prediction's error is measured.
package bench
