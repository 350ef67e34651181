package api

import (
	"errors"

	"rig/internal/layout"
	"rig/internal/provision"
	"rig/internal/textcheck"
)

// The stable code of every error class a caller may test for. Codes are part
// of the protocol: add new ones, never rename one. The daemon gives an error
// the code of the first sentinel it matches; Client turns the code back into
// the sentinel below, so errors.Is works on both sides of the socket.
const (
	CodeNoStudy             = "no_study"
	CodeNoMethod            = "no_method"
	CodeBadRequest          = "bad_request"
	CodeNotRegradable       = "not_regradable"
	CodeGateRefused         = "gate_refused"
	CodeVerdictUnreadable   = "verdict_unreadable"
	CodeStaleAsset          = "stale_asset"
	CodeTampered            = "tampered"
	CodeInvalidDesign       = "invalid_design"
	CodeUnsetReference      = "unset_reference"
	CodeTransitionRefused   = "transition_refused"
	CodeNoLicenceLine       = "no_licence_line"
	CodeIdempotencyConflict = "idempotency_conflict"
	CodeNameTaken           = "name_taken"
	CodeOverBudget          = "over_budget"
	CodeNoSpeed             = "no_speed"
	CodeEmptyPlan           = "empty_plan"
	CodeStoreConflict       = "store_conflict"
	CodeStoreLocked         = "store_locked"
	CodeNotFound            = "not_found"
	CodeNotProvisioned      = "not_provisioned"
	CodeInvalidUTF8         = "invalid_utf8"
	CodePromptTooLong       = "prompt_too_long"
	CodeIdentityMismatch    = "identity_mismatch"
	CodeForbidden           = "forbidden"
	CodePolicyRefused       = "policy_refused"
	CodeInternal            = "internal"
	CodeNoProposal          = "no_proposal"
	CodeMonthlyBudget       = "monthly_budget"
	// A name from a request that is not a name (a path, "..", a slash) and
	// a study folder, store or lifecycle file that is a planted symlink.
	CodeInvalidName = "invalid_name"
	CodeLinkRefused = "link_refused"
)

// The daemon's own error classes, defined here so that both sides share them.
var (
	// ErrNoStudy means no study of that name is registered.
	ErrNoStudy = errors.New("no such study")
	// ErrNoMethod means the daemon does not serve the method asked for: it
	// is older or newer than the command line.
	ErrNoMethod = errors.New("the daemon does not serve this method")
	// ErrBadRequest means a request body did not decode.
	ErrBadRequest = errors.New("bad request")
	// ErrInternal means handling the request panicked: the daemon kept
	// running, and its log has the stack.
	ErrInternal = errors.New("internal error in the daemon")
	// ErrNotRegradable is a trial whose output rig did not keep in a form a
	// grader can read again.
	ErrNotRegradable = errors.New("output not kept for re-grading")
	// ErrIdentity means a request names someone other than its caller.
	ErrIdentity = errors.New("the request names someone other than its caller")
	// ErrForbidden means the caller's roles do not allow the request.
	ErrForbidden = errors.New("not permitted")
	// ErrPolicy means the policy file is unreadable, malformed or not trusted.
	ErrPolicy = errors.New("policy file refused")
	// ErrNoProposal means no proposal has that id.
	ErrNoProposal = errors.New("no such proposal")
	// ErrMonthlyBudget means a run would take the month past its cap: a
	// conflict with what is left, until an operator raises the cap.
	ErrMonthlyBudget = errors.New("the month's budget is spent")
)

// The client's sentinels for classes whose own sentinel lives in a package a
// client does not link (the runner, the store, the runtimes). On the daemon's
// side the original sentinel carries the same code.
var (
	// ErrGate means a gate before counted runs refused (run.ErrGate).
	ErrGate = errors.New("gate refused")
	// ErrVerdictUnreadable means a stored preflight verdict did not decode
	// (run.ErrVerdictUnreadable).
	ErrVerdictUnreadable = errors.New("stored preflight verdict unreadable")
	// ErrStoreConflict is receipts.ErrConflict: a different record for a
	// key already written.
	ErrStoreConflict = errors.New("conflicting record")
	// ErrStoreLocked is receipts.ErrLocked: another process holds the
	// study's store.
	ErrStoreLocked = errors.New("store is locked by another process")
	// ErrNotFound is receipts.ErrNotFound: no such record in the store.
	ErrNotFound = errors.New("not found")
	// ErrPromptTooLong is runtimes.ErrPromptTooLong: a prompt over the
	// pinned context.
	ErrPromptTooLong = errors.New("prompt and stop cap exceed the pinned context")
)

// The client's sentinels for the classes of package studies (the study as
// data), which a client does not link: each is the sentinel of the same name
// there, with its text. On the daemon's side studies' own sentinel carries
// the code (daemon/wire.go), so an error of a study reads the same on both
// sides, matched by errors.Is against studies' sentinel in the daemon and
// against this one in a client.
var (
	// ErrStaleAsset is a pinned asset whose hash changed since it was
	// registered or frozen (studies.ErrStaleAsset).
	ErrStaleAsset = errors.New("stale asset")
	// ErrTampered is a snapshot whose stored hashes do not match its
	// content (studies.ErrTampered).
	ErrTampered = errors.New("snapshot does not match its hash")
	// ErrInvalidDesign is a design that failed validation
	// (studies.ErrInvalidDesign).
	ErrInvalidDesign = errors.New("invalid design")
	// ErrUnsetReference is a model file reference naming an unset variable
	// (studies.ErrUnsetReference).
	ErrUnsetReference = errors.New("unset reference")
	// ErrTransition is a refused change of a study's or a proposal's state
	// (studies.ErrTransition).
	ErrTransition = errors.New("transition refused")
	// ErrNoLicenceLine is a passing review without a licence line
	// (studies.ErrNoLicenceLine).
	ErrNoLicenceLine = errors.New("review has no licence line")
	// ErrIdempotencyConflict is a key reused with a different request
	// (studies.ErrIdempotencyConflict).
	ErrIdempotencyConflict = errors.New("idempotency key reused with another request")
	// ErrNameTaken is a register of a study name that already exists
	// (studies.ErrNameTaken).
	ErrNameTaken = errors.New("study name taken")
	// ErrOverBudget is a plan priced over a cap of its design
	// (studies.ErrOverBudget).
	ErrOverBudget = errors.New("plan over budget")
	// ErrNoSpeed is an arm the speed table does not price (studies.ErrNoSpeed).
	ErrNoSpeed = errors.New("no speed for arm")
	// ErrEmptyPlan is a design and task set that produce no trials
	// (studies.ErrEmptyPlan).
	ErrEmptyPlan = errors.New("plan has no trials")
)

// codes is every code and the sentinel the client gives it.
var codes = []struct {
	code string
	err  error
}{
	{CodeNoStudy, ErrNoStudy},
	{CodeNoMethod, ErrNoMethod},
	{CodeBadRequest, ErrBadRequest},
	{CodeNotRegradable, ErrNotRegradable},
	{CodeGateRefused, ErrGate},
	{CodeVerdictUnreadable, ErrVerdictUnreadable},
	{CodeStaleAsset, ErrStaleAsset},
	{CodeTampered, ErrTampered},
	{CodeInvalidDesign, ErrInvalidDesign},
	{CodeUnsetReference, ErrUnsetReference},
	{CodeTransitionRefused, ErrTransition},
	{CodeNoLicenceLine, ErrNoLicenceLine},
	{CodeIdempotencyConflict, ErrIdempotencyConflict},
	{CodeNameTaken, ErrNameTaken},
	{CodeOverBudget, ErrOverBudget},
	{CodeNoSpeed, ErrNoSpeed},
	{CodeEmptyPlan, ErrEmptyPlan},
	{CodeStoreConflict, ErrStoreConflict},
	{CodeStoreLocked, ErrStoreLocked},
	{CodeNotFound, ErrNotFound},
	{CodeNotProvisioned, provision.ErrNotProvisioned},
	{CodeInvalidUTF8, textcheck.ErrInvalidUTF8},
	{CodePromptTooLong, ErrPromptTooLong},
	{CodeIdentityMismatch, ErrIdentity},
	{CodeForbidden, ErrForbidden},
	{CodePolicyRefused, ErrPolicy},
	{CodeInternal, ErrInternal},
	{CodeNoProposal, ErrNoProposal},
	{CodeMonthlyBudget, ErrMonthlyBudget},
	{CodeInvalidName, layout.ErrInvalidName},
	{CodeLinkRefused, layout.ErrLink},
}

// Codes lists every code, in the order the daemon matches them.
func Codes() []string {
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = c.code
	}
	return out
}

// Sentinel is the error a code stands for on the client's side; nil for a
// code this build does not know (a newer daemon's).
func Sentinel(code string) error {
	for _, c := range codes {
		if c.code == code {
			return c.err
		}
	}
	return nil
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
	return &RemoteError{Msg: msg, Code: code, err: Sentinel(code)}
}

// ErrNoDaemon means nothing answers on the daemon's socket.
var ErrNoDaemon = errors.New("no rig daemon is running")

// ErrDaemonStopped means the daemon took the request and then went away
// without answering: it died, was killed or was stopped mid-request. It is
// the client's own verdict, so it never crosses the socket (no code).
var ErrDaemonStopped = errors.New("the rig daemon stopped")
