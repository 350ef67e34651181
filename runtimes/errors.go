package runtimes

import (
	"errors"
	"fmt"
)

// Sentinel errors a caller can test with errors.Is. Each wrapping error names the
// file, binary or socket involved and what to do.
var (
	// ErrBinaryMissing: the runtime's executable is not where the pins say.
	ErrBinaryMissing = errors.New("runtime binary not found")
	// ErrBusy: the socket or port is taken by another live server.
	ErrBusy = errors.New("address in use")
	// ErrModelFile: the model file is missing, unreadable or not a GGUF the runtime loads.
	ErrModelFile = errors.New("model file unusable")
	// ErrChecksum: a file's sha256 differs from its pin.
	ErrChecksum = errors.New("sha256 differs from the pin")
	// ErrCrashed: the runtime exited while rig was waiting on it (mid-call or while loading).
	ErrCrashed = errors.New("runtime exited")
	// ErrNotReady: the runtime did not become ready in time.
	ErrNotReady = errors.New("runtime did not become ready")
	// ErrPinNotHeld: the runtime would silently run something other than
	// the pins say (Ollama lowers a context above the trained length).
	ErrPinNotHeld = errors.New("the runtime would not hold this pin")
	// ErrPromptTooLong: a call's prompt plus its stop cap does not fit the
	// pinned context. The call is refused (an error receipt), never run with
	// the prompt truncated or the context shifted: two arms would answer
	// different questions.
	ErrPromptTooLong = errors.New("prompt and stop cap exceed the pinned context")
)

// promptTooLong is the refusal of a call whose prompt of n tokens and stop cap
// do not fit context.
func promptTooLong(n, stopCap, context int, how string) error {
	return fmt.Errorf("%w: the prompt is %d tokens and the stop cap %d, %d in all, over the pinned context of %d (%s; shorten the task's prompt, lower the stop cap or raise the context, and register the study again)",
		ErrPromptTooLong, n, stopCap, n+stopCap, context, how)
}
