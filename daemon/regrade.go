package daemon

import (
	"context"
	"fmt"

	"rig/api"
	"rig/run"
)

// RegradeRequest is `rig grade --regrade`, as the protocol names it.
type RegradeRequest = api.RegradeRequest

// ErrNotRegradable is a trial whose output rig did not keep in a form a
// grader can read again (run.Regrade returns it).
var ErrNotRegradable = run.ErrNotRegradable

// Regrade re-grades an execution's stored outputs with another version of
// their graders and stores the new grades beside the old ones, which are
// never touched. Unknown graders and versions, and outputs rig did not keep,
// are refused before anything is written; all new grades are written in one
// transaction.
func (rp Reports) Regrade(ctx context.Context, req RegradeRequest) (*api.RegradeReport, error) {
	if req.Execution != "" {
		if _, err := rp.s.execution(req.Study, req.Execution); err != nil {
			return nil, err
		}
	}
	snap, err := rp.s.Snapshot(req.Study)
	if err != nil {
		return nil, err
	}
	st, err := rp.s.store(req.Study)
	if err != nil {
		return nil, err
	}
	exec := req.Execution
	if exec == "" {
		l, err := rp.s.lifecycle(req.Study)
		if err != nil {
			return nil, err
		}
		if len(l.Finished) == 0 {
			return nil, fmt.Errorf("study %s has no finished execution to re-grade (name one with --execution)", req.Study)
		}
		exec = l.Finished[len(l.Finished)-1]
	}
	if _, err := st.Execution(ctx, exec); err != nil {
		return nil, fmt.Errorf("study %s: execution %s: %w", req.Study, exec, err)
	}
	banks, err := run.LoadBanks(snap)
	if err != nil {
		return nil, err
	}
	x, err := rp.s.execution(req.Study, exec)
	if err != nil {
		return nil, err
	}
	rep, err := run.Regrade(ctx, run.RegradeInput{Store: st, Exec: exec, RecDir: x.Dir(),
		Banks: banks, Registry: run.Env{NoSandbox: rp.s.NoSandbox}.Graders(), Grader: req.Grader, Version: req.Version})
	if err != nil {
		return nil, err
	}
	out := apiRegrade(req.Study, rep)
	return &out, nil
}
