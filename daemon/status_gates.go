package daemon

import (
	"context"
	"encoding/json"

	"rig/api"
	"rig/internal/atomicfile"
	"rig/preflight"
	"rig/run"
	"rig/studies"
)

// FitInfo is one arm's stored preflight verdict at its card, as status
// shows it.
type FitInfo = api.FitInfo

// gateInfo reads what the two gates before a run recorded: the preflight
// verdict of every arm at its card and the latest validation run of every
// harness. Neither is there before the study is frozen.
func (sr Studies) gateInfo(ctx context.Context, name string) ([]FitInfo, []run.ValidationRecord) {
	_, d, err := sr.s.frozen(name)
	if err != nil {
		return nil, nil
	}
	st, err := sr.s.store(name)
	if err != nil {
		return nil, nil
	}
	var fits []FitInfo
	for _, a := range d.Arms {
		p := studies.PreflightProfile(d, a)
		fi := FitInfo{Arm: a.Name, Card: p.Name}
		if raw, err := st.Preflight(ctx, a.Name, p.Name); err == nil && raw != nil {
			var v preflight.Verdict
			if json.Unmarshal(raw, &v) == nil {
				fi.Decided, fi.Fits, fi.Outcome, fi.Reason, fi.MarginBytes, fi.DecidedAt = true, v.Fits, v.Outcome, v.Reason, v.Margin, v.DecidedAt
			}
		}
		fits = append(fits, fi)
	}
	var vals []run.ValidationRecord
	if sd, err := sr.s.study(name); err == nil {
		_ = atomicfile.ReadJSON(sd.ValidationRecord(), &vals)
	}
	return fits, vals
}
