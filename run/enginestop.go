package run

import (
	"rig/analysis"
	"rig/receipts"
	"rig/studies"
)

// CheckStopping says whether the design has a stopping rule, and refuses
// one that cannot be monitored over this plan (a judged monitored job
// kind, no named pair with paired tasks), as the local runner would when
// the execution starts.
func CheckStopping(d *studies.Design, plan *studies.Plan) (bool, error) {
	m, err := newMonitor(d, plan)
	return m != nil, err
}

// StopLook is the stopping rule's look for an execution whose trials ran
// elsewhere (scale-out's workers), at the end of the block whose last trial
// is plan.Trials[through]. It walks the counted receipts in plan order
// from the start, looking at the end of every block, exactly as the local
// runner does (and as a resumed local run replays its receipts), and stops
// at the first look that settles every monitored comparison: seq then has
// StoppedEarly set and the plan's later trials without a counted receipt
// as NotRun. ruled is false when the design has no stopping rule. The
// caller stores seq on the execution (receipts.Store.PutStop), as the local
// runner does at each look.
func StopLook(d *studies.Design, plan *studies.Plan, counted map[receipts.TrialKey]receipts.Receipt, through int) (seq analysis.Sequential, ruled bool, err error) {
	m, err := newMonitor(d, plan)
	if err != nil || m == nil {
		return analysis.Sequential{}, false, err
	}
	through = min(through, len(plan.Trials)-1)
	for i := 0; i <= through; i++ {
		t := plan.Trials[i]
		if rc, ok := counted[receiptTrial(t.Key)]; ok {
			m.record(rc)
		}
		last := i == len(plan.Trials)-1
		if !last && plan.Trials[i+1].Block == t.Block {
			continue
		}
		look, err := m.check(last)
		if err != nil {
			return analysis.Sequential{}, true, err
		}
		if look.Stop && !last {
			var notRun []string
			for _, u := range plan.Trials[i+1:] {
				if _, ok := counted[receiptTrial(u.Key)]; !ok {
					notRun = append(notRun, analysis.NotRunID(u.Key.Arm, u.Key.JobKind, u.Key.Task, u.Key.Repeat))
				}
			}
			return m.sequential(true, notRun), true, nil
		}
	}
	return m.sequential(false, nil), true, nil
}
