package daemon

import (
	"encoding/json"
	"errors"

	"rig/internal/layout"
	"rig/internal/provision"
	"rig/internal/textcheck"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/studies/run"
)

// The daemon serves the command line over a unix socket (mode 0600) with one
// small JSON-over-HTTP protocol: POST /METHOD with the request as the body;
// the answer is {"result": ..., "text": "..."} or {"error": "...", "code": "..."}.
// The code keeps an error's class across the socket: the client turns it
// back into an error that errors.Is matches against the same sentinel.

type reply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Text   string          `json:"text,omitempty"`
	Error  string          `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"`
}

// errorCodes is the stable code of every sentinel a caller may test for.
// Codes are part of the protocol: add new ones, never rename one.
var errorCodes = []struct {
	code string
	err  error
}{
	{"no_study", ErrNoStudy},
	{"no_method", ErrNoMethod},
	{"bad_request", ErrBadRequest},
	{"not_regradable", ErrNotRegradable},
	{"gate_refused", run.ErrGate},
	{"verdict_unreadable", run.ErrVerdictUnreadable},
	{"stale_asset", studies.ErrStaleAsset},
	{"tampered", studies.ErrTampered},
	{"invalid_design", studies.ErrInvalidDesign},
	{"unset_reference", studies.ErrUnsetReference},
	{"transition_refused", studies.ErrTransition},
	{"no_licence_line", studies.ErrNoLicenceLine},
	{"idempotency_conflict", studies.ErrIdempotencyConflict},
	{"name_taken", studies.ErrNameTaken},
	{"over_budget", studies.ErrOverBudget},
	{"no_speed", studies.ErrNoSpeed},
	{"empty_plan", studies.ErrEmptyPlan},
	{"store_conflict", receipts.ErrConflict},
	{"store_locked", receipts.ErrLocked},
	{"not_found", receipts.ErrNotFound},
	{"not_provisioned", provision.ErrNotProvisioned},
	{"invalid_utf8", textcheck.ErrInvalidUTF8},
	{"prompt_too_long", runtimes.ErrPromptTooLong},
	{"identity_mismatch", ErrIdentity},
	{"forbidden", ErrForbidden},
	{"policy_refused", ErrPolicy},
	{"internal", ErrInternal},
	{"no_proposal", ErrNoProposal},
	{"monthly_budget", ErrMonthlyBudget},
	// A name from a request that is not a name (a path, "..", a slash) and
	// a study folder, store or lifecycle file that is a planted symlink.
	{"invalid_name", layout.ErrInvalidName},
	{"link_refused", layout.ErrLink},
}

// ErrNoMethod means the daemon does not serve the method asked for: it is
// older or newer than the command line.
var ErrNoMethod = errors.New("the daemon does not serve this method")

// ErrBadRequest means a request body did not decode.
var ErrBadRequest = errors.New("bad request")

// ErrInternal means handling the request panicked: the daemon kept running,
// and its log has the stack.
var ErrInternal = errors.New("internal error in the daemon")

// codeOf is the code of the first sentinel err matches, or "".
func codeOf(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// RemoteError is an error the daemon returned: its message as the daemon
// wrote it, and the sentinel its code names, so errors.Is sees through it.
type RemoteError struct {
	Msg  string
	Code string
	err  error
}

func (e *RemoteError) Error() string { return e.Msg }

// Unwrap is the sentinel named by the error's code (nil for an unknown code).
func (e *RemoteError) Unwrap() error { return e.err }

func remoteError(msg, code string) error {
	e := &RemoteError{Msg: msg, Code: code}
	for _, c := range errorCodes {
		if c.code == code {
			e.err = c.err
		}
	}
	return e
}
