package scaleout

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"rig/analysis"
	"rig/receipts"
	"rig/run"
	"rig/studies"
)

// blockBounds cuts a plan into chunks of whole blocks, each at least size
// trials (the last may be shorter): the start index of each chunk. A
// stopping rule is checked at block ends, so no chunk splits a block.
func blockBounds(plan *studies.Plan, size int) []int {
	var out []int
	start := 0
	for i := range plan.Trials {
		if i == start {
			out = append(out, start)
		}
		last := i == len(plan.Trials)-1
		if !last && plan.Trials[i+1].Block != plan.Trials[i].Block && i+1-start >= size {
			start = i + 1
		}
	}
	return out
}

// CheckStop is the coordinator's activity at the end of a block of a
// design with a stopping rule: the local runner's look (run.StopLook) over
// the execution's counted receipts, stored on the execution as the local
// runner stores it, so the report and rig study status read it the same.
func (c *Coordinator) CheckStop(ctx context.Context, s StopCheck) (StopResult, error) {
	defer beat(ctx)() // a long walk of receipts is alive (coordinatorHeartbeatTimeout)
	plan, _, d, st, err := c.planOf(s.Study, s.Execution)
	if err != nil {
		return StopResult{}, err
	}
	counted, err := st.Counted(ctx, s.Execution)
	if err != nil {
		return StopResult{}, err
	}
	seq, ruled, err := run.StopLook(d, plan, counted, s.Through)
	if err != nil {
		// The rule or the plan, not the moment: trying again gives the same.
		return StopResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("study %s: %v", s.Study, err), ErrMismatch, nil)
	}
	if !ruled {
		return StopResult{}, nil
	}
	raw, err := json.Marshal(seq)
	if err != nil {
		return StopResult{}, err
	}
	if err := st.PutStop(ctx, s.Execution, raw); err != nil {
		return StopResult{}, err
	}
	why := run.DescribeStop(seq)
	if seq.StoppedEarly {
		c.log.Info("stopping rule settled every monitored comparison", "study", s.Study, "execution", s.Execution, "check", seq.Look.Check+1, "not_run", len(seq.NotRun))
	}
	return StopResult{Stopped: seq.StoppedEarly, Why: why, NotRun: len(seq.NotRun)}, nil
}

// storedStop is the execution's last stored look, if its design has a
// stopping rule and a look was taken.
func storedStop(ctx context.Context, st *receipts.Store, execution string) (analysis.Sequential, bool) {
	raw, found, err := st.Stop(ctx, execution)
	if err != nil || !found {
		return analysis.Sequential{}, false
	}
	var seq analysis.Sequential
	if json.Unmarshal(raw, &seq) != nil {
		return analysis.Sequential{}, false
	}
	return seq, true
}
