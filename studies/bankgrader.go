package studies

import (
	"fmt"
	"strings"

	"rig/internal/jsonerr"
	"rig/tasks"
)

// A job kind names one grader, and its bank's tasks are graded by the
// grader each task names. Register and freeze hold the two together: a
// bank whose tasks name another grader would be scored by it with no word
// in the design, which says something else.

// maxNamedTasks is how many mismatched tasks a refusal names; the rest are
// counted.
const maxNamedTasks = 5

// TaskGraders maps each task's id to the grader it names, for Bank.Graders.
func TaskGraders(ts []tasks.Task) map[string]string {
	out := make(map[string]string, len(ts))
	for _, t := range ts {
		out[t.ID] = t.Grader.Name
	}
	return out
}

// checkGraders refuses a bank, read for job kind i, whose counted tasks
// name a grader other than the job kind's, naming the first few tasks and
// counting the rest. A judged job kind is exempt: its judge grades every
// task, whatever grader the task names for its key.
func checkGraders(i int, jk JobKind, b Bank) error {
	if jk.Grader.Name == JudgeGrader || len(b.Tasks) == 0 {
		return nil
	}
	if b.Graders == nil {
		return fmt.Errorf("job_kinds[%d].task_bank: %s: the asset resolver did not say which grader each task names, so the job kind's grader cannot be checked against them (a wiring bug: fill Bank.Graders with TaskGraders)", i, b.Path)
	}
	var named []string
	others := map[string]int{}
	n := 0
	for _, id := range b.Tasks {
		g := b.Graders[id]
		if g == jk.Grader.Name {
			continue
		}
		n++
		others[g]++
		if len(named) < maxNamedTasks {
			named = append(named, fmt.Sprintf("%s (%s)", jsonerr.Quote(id), jsonerr.Quote(g)))
		}
	}
	if n == 0 {
		return nil
	}
	list := strings.Join(named, ", ")
	if n > len(named) {
		list += fmt.Sprintf(" and %d more", n-len(named))
	}
	return fmt.Errorf("job_kinds[%d].grader.name: %s, but %d of the %d tasks of its bank %s name another grader: %s (a job kind is graded by one grader: set grader.name to the bank's, split the bank into one job kind per grader, or leave the other tasks out with exclude_tasks)",
		i, jsonerr.Quote(jk.Grader.Name), n, len(b.Tasks), b.Path, list)
}
