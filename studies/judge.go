package studies

import "strings"

// JudgeGrader is the grader name of a job kind graded by a model judge; the
// job kind's judge field names the judge arm.
const JudgeGrader = "judge"

// JudgeGraderVersion versions what the judge is asked and how its answer is
// read (instructions, answer grammar, parsing). Changing any is a bump.
const JudgeGraderVersion = 1

// JudgeName is the grader name a judge arm's grades carry.
func JudgeName(arm string) string { return JudgeGrader + ":" + arm }

// HarnessOf names the harness an arm runs under: "aider" for an
// aider+RUNTIME arm, else the runtime itself.
func HarnessOf(runtime string) string {
	if strings.HasPrefix(runtime, "aider+") {
		return "aider"
	}
	return runtime
}

// BaseRuntime is the runtime under an arm's harness.
func BaseRuntime(runtime string) string { return strings.TrimPrefix(runtime, "aider+") }
