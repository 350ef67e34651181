package studies

import (
	"fmt"
	"slices"
	"strings"

	"rig/internal/jsonerr"
)

// A study may leave some of a bank's tasks out, each with its reason
// (design.exclude_tasks): a prompt too long for an arm's context, a key found
// wrong after the audit. The exclusion is written in the design, so it is in
// the design hash and the snapshot; the plan never sees the task; the report
// lists it with the reason. Nothing is ever left out silently: a task is out
// only by a line that names it and says why.

// MaxExcludedTasks bounds exclude_tasks, as the schema does.
const MaxExcludedTasks = 10000

// excludeTasks checks the rules that need only the design: a known job kind,
// a task id, a reason, no task twice. That the task is in its bank is
// checked where the bank is read (excluded).
func (v *validator) excludeTasks() {
	if n := len(v.d.ExcludeTasks); n > MaxExcludedTasks {
		v.add(KindInvalid, "exclude_tasks", "%d entries: at most %d (a study that leaves out that many tasks needs another bank)", n, MaxExcludedTasks)
		return
	}
	seen := map[[2]string]int{}
	for i, x := range v.d.ExcludeTasks {
		p := fmt.Sprintf("exclude_tasks[%d]", i)
		if !slices.ContainsFunc(v.d.JobKinds, func(jk JobKind) bool { return jk.Name == x.JobKind }) {
			v.add(KindUnknownRef, p+".job_kind", "%q is not a job kind of this design (name one of job_kinds[].name)", x.JobKind)
		}
		if strings.TrimSpace(x.Task) == "" {
			v.add(KindMissing, p+".task", "missing (the id of the task to leave out, as its bank writes it)")
		}
		if strings.TrimSpace(x.Why) == "" {
			v.add(KindMissing, p+".why", "missing (a task is left out only with its reason, e.g. \"prompt longer than the 1024-token context\"; the report shows it)")
		}
		k := [2]string{x.JobKind, x.Task}
		if j, dup := seen[k]; dup {
			v.add(KindDuplicate, p+".task", "%q of job kind %q is already exclude_tasks[%d] (leave each task out once)", x.Task, x.JobKind, j)
		}
		seen[k] = i
	}
}

// excluded takes the design's exclusions for job kind jk out of the bank's
// frozen task list and records them on it, refusing an exclusion that names
// a task the bank does not count.
func excluded(d *Design, jk string, b *Bank) error {
	for i, x := range d.ExcludeTasks {
		if x.JobKind != jk {
			continue
		}
		at := slices.Index(b.Tasks, x.Task)
		if at < 0 {
			return fmt.Errorf("exclude_tasks[%d].task: %s is not among the counted tasks of job kind %s's bank %s (check the id against the bank; a hold-out task is out already)", i, jsonerr.Quote(x.Task), jk, b.Path)
		}
		b.Tasks = slices.Delete(slices.Clone(b.Tasks), at, at+1)
		b.Excluded = append(b.Excluded, x)
	}
	if len(b.Tasks) == 0 && len(b.Excluded) > 0 {
		return fmt.Errorf("exclude_tasks: every task of job kind %s's bank %s is left out, so nothing would run (exclude fewer)", jk, b.Path)
	}
	return nil
}

// Excluded lists every task the snapshot leaves out, with its reason, in
// design order.
func (s *Snapshot) Excluded() []ExcludedTask {
	var out []ExcludedTask
	for _, b := range s.Banks {
		out = append(out, b.Excluded...)
	}
	return out
}
