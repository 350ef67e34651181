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

// Runtime is an arm's runtime as a design names it: a server ("ollama",
// "llama-server") or a harness over one ("aider+ollama"). Validation holds
// it to RuntimeNames; its parts are read by its methods, never by taking the
// string apart where it is used.
type Runtime string

// HarnessAider is the harness of an aider+SERVER arm.
const HarnessAider = "aider"

// Harness names what runs the arm's trials: "aider" for an aider+SERVER
// arm, else the server itself.
func (r Runtime) Harness() string {
	if strings.HasPrefix(string(r), HarnessAider+"+") {
		return HarnessAider
	}
	return string(r)
}

// Engine is the server that holds the model, under the harness if any.
func (r Runtime) Engine() string { return strings.TrimPrefix(string(r), HarnessAider+"+") }

// Aider says the arm runs under Aider.
func (r Runtime) Aider() bool { return r.Harness() == HarnessAider }
