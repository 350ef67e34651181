package daemon

import (
	"errors"

	"rig/api"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/internal/textcheck"
	"rig/receipts"
	"rig/run"
	"rig/runtimes"
	"rig/studies"
)

// The daemon serves the command line over a unix socket (mode 0600) with the
// protocol package api defines: POST /METHOD, the reply envelope api.Reply,
// and a stable code for each class of error, so that errors.Is works across
// the socket. This file is the server's half of the codes: which sentinel,
// wherever it lives, carries which code.

// errorCodes gives the code of every sentinel a caller may test for; a
// daemon error carries the code of the first one it matches. Every code of
// api.Codes is here (TestEveryCodeIsProduced).
var errorCodes = []struct {
	code string
	err  error
}{
	{api.CodeNoStudy, ErrNoStudy},
	{api.CodeNoMethod, ErrNoMethod},
	{api.CodeBadRequest, ErrBadRequest},
	{api.CodeNotRegradable, ErrNotRegradable},
	{api.CodeGateRefused, run.ErrGate},
	{api.CodeVerdictUnreadable, run.ErrVerdictUnreadable},
	{api.CodeStaleAsset, studies.ErrStaleAsset},
	{api.CodeTampered, studies.ErrTampered},
	{api.CodeInvalidDesign, studies.ErrInvalidDesign},
	{api.CodeUnsetReference, studies.ErrUnsetReference},
	{api.CodeTransitionRefused, studies.ErrTransition},
	{api.CodeNoLicenceLine, studies.ErrNoLicenceLine},
	{api.CodeIdempotencyConflict, studies.ErrIdempotencyConflict},
	{api.CodeNameTaken, studies.ErrNameTaken},
	{api.CodeOverBudget, studies.ErrOverBudget},
	{api.CodeNoSpeed, studies.ErrNoSpeed},
	{api.CodeEmptyPlan, studies.ErrEmptyPlan},
	{api.CodeStoreConflict, receipts.ErrConflict},
	{api.CodeStoreLocked, receipts.ErrLocked},
	{api.CodeNotFound, receipts.ErrNotFound},
	{api.CodeNotProvisioned, provision.ErrNotProvisioned},
	{api.CodeInvalidUTF8, textcheck.ErrInvalidUTF8},
	{api.CodePromptTooLong, runtimes.ErrPromptTooLong},
	{api.CodeIdentityMismatch, ErrIdentity},
	{api.CodeForbidden, ErrForbidden},
	{api.CodePolicyRefused, ErrPolicy},
	{api.CodeInternal, ErrInternal},
	{api.CodeNoProposal, ErrNoProposal},
	{api.CodeMonthlyBudget, ErrMonthlyBudget},
	{api.CodeInvalidName, layout.ErrInvalidName},
	{api.CodeLinkRefused, layout.ErrLink},
}

// ErrNoMethod means the daemon does not serve the method asked for: it is
// older or newer than the command line.
var ErrNoMethod = api.ErrNoMethod

// ErrBadRequest means a request body did not decode.
var ErrBadRequest = api.ErrBadRequest

// ErrInternal means handling the request panicked: the daemon kept running,
// and its log has the stack.
var ErrInternal = api.ErrInternal

// codeOf is the code of the first sentinel err matches, or "".
func codeOf(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}
