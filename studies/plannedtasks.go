package studies

import (
	"context"
	"fmt"
)

// PlannedTasks is the task ids a freeze of d would plan, by job kind: each
// bank read through assets where the design names it (from baseDir), its
// sample taken and its excluded tasks left out, as Freeze does, but with no
// model hashed. What depends on the design alone before a freeze (the
// decision rule's fate) is judged on it.
func PlannedTasks(ctx context.Context, d *Design, assets Assets, baseDir string) (map[string][]string, error) {
	out := map[string][]string{}
	for i, jk := range d.JobKinds {
		jk.TaskBank = BankPath(jk.TaskBank, baseDir)
		b, err := assets.Bank(ctx, jk)
		if err != nil {
			return nil, fmt.Errorf("job_kinds[%d].task_bank: %s: %w", i, jk.TaskBank, err)
		}
		if err := excluded(d, jk.Name, &b); err != nil {
			return nil, err
		}
		out[jk.Name] = b.Tasks
	}
	return out, nil
}
