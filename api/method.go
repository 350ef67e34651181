package api

// The daemon's methods: the last element of the URL path a request is POSTed
// to. They are part of the protocol (an older command line calls a newer
// daemon): add new ones, never rename one.
const (
	// Studies: registration and the lifecycle.
	MethodRegister = "register"
	MethodReview   = "review"
	MethodApprove  = "approve"
	MethodWithdraw = "withdraw"
	MethodFreeze   = "freeze"
	MethodStatus   = "status"
	MethodList     = "list"

	// Gates before counted runs.
	MethodPreflight = "preflight"
	MethodValidate  = "validate"
	MethodDryRun    = "dry-run"

	// Executions.
	MethodRun          = "run"
	MethodCancel       = "cancel"
	MethodCheck        = "check"
	MethodMerge        = "merge"
	MethodEngineReplay = "engine-replay"
	MethodExport       = "export"

	// Reports, decisions and re-grades.
	MethodReport        = "report"
	MethodDecide        = "decide"
	MethodAmendDecision = "amend-decision"
	MethodGrade         = "grade"
	MethodUI            = "ui"

	// Proposals and the baseline.
	MethodProposalList    = "proposal-list"
	MethodProposalShow    = "proposal-show"
	MethodProposalApprove = "proposal-approve"
	MethodProposalReject  = "proposal-reject"
	MethodBaseline        = "baseline"

	// The monthly budget.
	MethodBudget    = "budget"
	MethodBudgetSet = "budget-set"

	// Tries of a draft design, before a study exists.
	MethodTry      = "try"
	MethodTryList  = "try-list"
	MethodTryPrune = "try-prune"
)

// Methods lists every method above: what a daemon of this build serves.
func Methods() []string {
	return []string{
		MethodRegister, MethodReview, MethodApprove, MethodWithdraw, MethodFreeze, MethodStatus, MethodList,
		MethodPreflight, MethodValidate, MethodDryRun,
		MethodRun, MethodCancel, MethodCheck, MethodMerge, MethodEngineReplay, MethodExport,
		MethodReport, MethodDecide, MethodAmendDecision, MethodGrade, MethodUI,
		MethodProposalList, MethodProposalShow, MethodProposalApprove, MethodProposalReject, MethodBaseline,
		MethodBudget, MethodBudgetSet,
		MethodTry, MethodTryList, MethodTryPrune,
	}
}
