package findings

import (
	"cmp"
	"slices"

	"rig/analysis"
	"rig/receipts"
	"rig/report"
	"rig/studies"
)

// judgedPass is, for a job kind a judge grades, the judge's pass per trial
// (what the analysis ranked on); nil for other job kinds.
func judgedPass(d *studies.Design, jobKind string, trials []analysis.Trial) map[studies.TrialKey]bool {
	judged := false
	for _, jk := range d.JobKinds {
		judged = judged || (jk.Name == jobKind && jk.Grader.Name == studies.JudgeGrader)
	}
	if !judged {
		return nil
	}
	out := map[studies.TrialKey]bool{}
	for _, t := range trials {
		if t.JobKind == jobKind && !t.Missing && !t.Preempted {
			out[studies.TrialKey{Arm: t.Arm, JobKind: t.JobKind, Task: t.Task, Repeat: t.Repeat}] = t.Pass
		}
	}
	return out
}

// failureCounts counts one job kind's non-passing receipts by arm and code.
// For a judged job kind, pass is the judge's (judged), and a trial the judge
// never graded is counted as ungraded rather than failed.
// An error is counted under its reason, and only when no later attempt of
// the trial was counted: a rerun that succeeded is not a failure.
func failureCounts(recs []receipts.Receipt, jobKind string, judged map[studies.TrialKey]bool) []report.Failure {
	counted := map[studies.TrialKey]bool{}
	for _, r := range recs {
		if r.Outcome.Counted() {
			counted[trialOf(r)] = true
		}
	}
	type armCode struct{ arm, code string }
	count := map[armCode]int{}
	for _, r := range recs {
		if r.JobKind != jobKind {
			continue
		}
		code := ""
		if judged != nil && r.Outcome == receipts.Scored {
			pass, graded := judged[trialOf(r)]
			switch {
			case !graded:
				code = "not graded by the judge"
			case !pass && r.Truncated:
				code = "failed (judge): truncated at the stop cap"
			case !pass:
				code = "failed (judge): wrong answer"
			}
			if code != "" {
				count[armCode{r.Arm, code}]++
			}
			continue
		}
		switch {
		case r.Outcome == receipts.Scored && r.Grade != nil && !r.Grade.Pass && r.Truncated:
			code = "failed: truncated at the stop cap"
		case r.Outcome == receipts.Scored && r.Grade != nil && !r.Grade.Pass:
			code = "failed: wrong answer"
		case r.Outcome == receipts.Error && counted[trialOf(r)]:
		case r.Outcome == receipts.Error:
			code = "error: " + cmp.Or(studies.FirstLine(r.Detail), "no detail recorded")
		case r.Outcome == receipts.Capped && r.Truncated:
			code = "capped: truncated at the stop cap"
		case r.Outcome != receipts.Scored:
			code = string(r.Outcome)
		}
		if code != "" {
			count[armCode{r.Arm, code}]++
		}
	}
	var out []report.Failure
	for k, n := range count {
		out = append(out, report.Failure{Arm: k.arm, Code: k.code, Count: n})
	}
	// By arm, then code: the same evidence gives the same report, byte for
	// byte (a map's order differed from run to run).
	slices.SortFunc(out, func(a, b report.Failure) int { return cmp.Or(cmp.Compare(a.Arm, b.Arm), cmp.Compare(a.Code, b.Code)) })
	return out
}
