package daemon

import (
	"encoding/json"

	"rig/api"
	"rig/run"
	"rig/scaleout"
)

// The boundary between the Service and the socket: the Service works in the
// runner's, the store's and the engine's types; what goes out on the wire is
// the api package's. Where both have the same fields a Go conversion is used,
// so that a field added on one side and not the other stops the build.

// studyReply is a Service answer about a study, as the protocol sends it.
func studyReply(info StudyInfo, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return apiStudy(info), nil
}

func apiStudy(info StudyInfo) api.StudyInfo {
	out := api.StudyInfo{
		Name: info.Name, State: info.State, DesignHash: info.DesignHash, SnapshotHash: info.SnapshotHash,
		Dir: info.Dir, Store: info.Store, Licences: info.Licences, Audit: info.Audit, Replayed: info.Replayed,
		Preflight: info.Preflight, Validation: apiValidations(info.Validation), Activity: info.Activity,
		LicenceTerms: info.LicenceTerms,
	}
	for _, e := range info.Executions {
		out.Executions = append(out.Executions, api.ExecInfo(e))
	}
	return out
}

// execReply is an execution's progress, as the protocol sends it.
func execReply(info run.ExecInfo, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return api.ExecInfo(info), nil
}

func apiValidations(recs []run.ValidationRecord) []api.ValidationRecord {
	var out []api.ValidationRecord
	for _, v := range recs {
		// The containment readings go on as the runtime package wrote
		// them: the protocol passes them through, it does not type them.
		c, _ := json.Marshal(v.Containment)
		out = append(out, api.ValidationRecord{Snapshot: v.Snapshot, Harness: v.Harness, Arm: v.Arm, At: v.At,
			Pass: v.Pass, Problems: v.Problems, Containment: c, Record: v.Record, Caps: v.Caps, Speed: v.Speed})
	}
	return out
}

func apiReplays(res []scaleout.ReplayResult) []api.ReplayResult {
	var out []api.ReplayResult
	for _, r := range res {
		e := r.ReplayEntry
		out = append(out, api.ReplayResult{Arm: e.Arm, Key: e.Key, Attempt: e.Attempt, Entry: e.Entry, Queue: e.Queue,
			Runtime: e.Runtime, BinarySHA256: e.BinarySHA256, RecordSHA256: e.RecordSHA256,
			Worker: r.Worker, Status: r.Status, Replayed: r.Replayed, Reproduced: r.Reproduced,
			MaxAbsDiff: r.MaxAbsDiff, Warnings: r.Warnings})
	}
	return out
}

// regradeReply is a re-grade's report, as the protocol sends it.
func regradeReply(rep *api.RegradeReport, err error) (any, error) {
	if err != nil || rep == nil {
		return nil, err
	}
	return *rep, nil
}

// apiRegrade is the runner's re-grade of study as the protocol names it.
func apiRegrade(study string, rep *run.RegradeReport) api.RegradeReport {
	out := api.RegradeReport{Study: study, Execution: rep.Execution, Written: rep.Written, Changed: rep.Changed, Skipped: rep.Skipped}
	for _, row := range rep.Rows {
		out.Rows = append(out.Rows, api.RegradeRow(row))
	}
	return out
}
