package daemon

import (
	"context"

	"rig/run"
	"rig/studies"
)

// fateWarnings is what the design alone says about its decision rule
// (run.FateOfRule), for a study not yet run: register, review, approve and
// freeze all show it, so that a reviewer sees a rule certain to say one
// thing before passing it. A frozen study's planned tasks are its
// snapshot's; before the freeze they are read from the banks as the freeze
// will read them. A bank that cannot be read gives no warning here: the
// freeze names that problem itself.
func (sr Studies) fateWarnings(ctx context.Context, name string, state studies.State, d *studies.Design, baseDir string) []string {
	var planned map[string][]string
	switch state {
	case studies.Draft, studies.Reviewed, studies.Approved:
		env, err := sr.s.callerEnv(ctx)
		if err != nil {
			return nil
		}
		if planned, err = studies.PlannedTasks(ctx, d, env.TryAssets(), baseDir); err != nil {
			return nil
		}
	case studies.Frozen:
		snap, err := sr.s.Snapshot(name)
		if err != nil {
			return nil
		}
		planned = snap.Tasks()
	default:
		return nil // the rule is being, or has been, applied to trials
	}
	if f := run.FateOfRule(d, planned); f.Certain {
		return []string{f.Warning}
	}
	return nil
}
