package daemon

import (
	"encoding/json"

	"rig/api"
	"rig/run"
	"rig/scaleout"
	"rig/studies"
)

// The boundary between the Service and the socket: the Service works in the
// study's, the runner's, the store's and the engine's types; what goes out
// on the wire is the api package's. Where both have the same fields a Go
// conversion is used, so that a field added on one side and not the other
// stops the build. Where a field's type is itself one of these (studies.Pins
// holds a studies.Sampling, api.Pins an api.Sampling) Go cannot convert the
// whole, and the converter below names each field: TestBoundaryKeepsEveryField
// fills every field of the source type and checks the JSON of the converted
// value is the source's own, so a field added on one side only fails there.

// studyReply is a Service answer about a study, as the protocol sends it.
func studyReply(info StudyInfo, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return apiStudy(info), nil
}

func apiStudy(info StudyInfo) api.StudyInfo {
	out := api.StudyInfo{
		Name: info.Name, State: api.State(info.State), DesignHash: info.DesignHash, SnapshotHash: info.SnapshotHash,
		Dir: info.Dir, Store: info.Store, Licences: info.Licences, Audit: convertAll(info.Audit, apiAudit), Replayed: info.Replayed,
		Preflight: info.Preflight, Validation: apiValidations(info.Validation), Activity: info.Activity,
		LicenceTerms: convertAll(info.LicenceTerms, apiLicenceTerm), Warnings: info.Warnings,
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
			Pass: v.Pass, Problems: v.Problems, Containment: c, Record: v.Record, Caps: v.Caps, Speed: (*api.Speed)(v.Speed)})
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

// convertAll converts each element with f, keeping a nil slice nil and an
// empty one empty: a field without omitempty is null for one and [] for the
// other on the wire, as it was when the study's own type went out.
func convertAll[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func apiAudit(a studies.AuditEntry) api.AuditEntry {
	return api.AuditEntry{Event: a.Event, Actor: a.Actor, UID: a.UID, At: a.At, Why: a.Why,
		From: api.State(a.From), To: api.State(a.To), Detail: a.Detail}
}

func apiLicenceTerm(t studies.LicenceTerm) api.LicenceTerm {
	allow := func(a studies.LicenceAllow) api.LicenceAllow { return api.LicenceAllow(a) }
	return api.LicenceTerm{EntryID: t.EntryID, Item: t.Item, Licence: t.Licence, SourcePage: t.SourcePage,
		Clause: t.Clause, DateRead: t.DateRead, Registry: t.Registry,
		Allows: convertAll(t.Allows, allow), Study: convertAll(t.Study, allow), Restricted: t.Restricted}
}

func apiPins(p studies.Pins) api.Pins {
	return api.Pins{Quant: p.Quant, Context: p.Context, Sampling: api.Sampling(p.Sampling), StopCap: p.StopCap,
		Effort: api.Effort(p.Effort), RuntimeBuild: p.RuntimeBuild, Offload: p.Offload, Slots: p.Slots}
}

func apiBinary(b studies.Binary) api.Binary { return api.Binary(b) }

// apiEstimate is a dry run's price as the protocol sends it; nil for none.
func apiEstimate(e *studies.Estimate) *api.Estimate {
	if e == nil {
		return nil
	}
	out := &api.Estimate{
		Arms:   convertAll(e.Arms, func(a studies.ArmCost) api.ArmCost { return api.ArmCost(a) }),
		Trials: e.Trials, Loads: e.Loads, WallTime: e.WallTime, EnergyWh: e.EnergyWh,
		CapWallTime: e.CapWallTime, CapEnergyWh: e.CapEnergyWh,
	}
	if s := e.Stopping; s != nil {
		out.Stopping = &api.StoppingPrice{
			Scenarios: convertAll(s.Scenarios, func(sc studies.StoppingScenario) api.StoppingScenario { return api.StoppingScenario(sc) }),
			MaxTrials: s.MaxTrials, MaxWallTime: s.MaxWallTime, Model: s.Model,
		}
	}
	return out
}
