package inspectlog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"rig/genrecord"
	"rig/receipts"
	"rig/studies"
)

// FormatVersion is the eval log version rig writes (EvalLog.version).
const FormatVersion = 2

// Build makes one log per arm × job kind of the execution, in arm then job
// kind order. Each trial is one sample (its task id; its repeat the
// epoch); its last attempt gives the output and the score, and an attempt
// that gave no score (preempted, error) is a sample error, never a score.
func Build(x Execution) ([]Log, error) {
	if x.Design == nil {
		return nil, fmt.Errorf("execution %s: no design", x.ID)
	}
	groups := map[[2]string][]receipts.Receipt{}
	for _, r := range x.Receipts {
		if r.ExecutionID != x.ID {
			continue
		}
		k := [2]string{r.Arm, r.JobKind}
		groups[k] = append(groups[k], r)
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("execution %s of study %s has no receipts: nothing to export (run it first, or name another with --execution)", x.ID, x.Study)
	}
	keys := make([][2]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	var logs []Log
	for _, k := range keys {
		l, err := buildLog(x, k[0], k[1], groups[k])
		if err != nil {
			return nil, err
		}
		logs = append(logs, l)
	}
	return logs, nil
}

// trial is one trial's attempts, in attempt order.
type trial struct {
	task     string
	repeat   int
	attempts []receipts.Receipt
}

func trialsOf(rs []receipts.Receipt) []trial {
	by := map[string]*trial{}
	var order []string
	for _, r := range rs {
		k := r.Trial().String()
		t, ok := by[k]
		if !ok {
			t = &trial{task: r.TaskID, repeat: r.Repeat}
			by[k] = t
			order = append(order, k)
		}
		t.attempts = append(t.attempts, r)
	}
	out := make([]trial, 0, len(order))
	for _, k := range order {
		t := by[k]
		sort.Slice(t.attempts, func(i, j int) bool { return t.attempts[i].Attempt < t.attempts[j].Attempt })
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].task != out[j].task {
			return out[i].task < out[j].task
		}
		return out[i].repeat < out[j].repeat
	})
	return out
}

func buildLog(x Execution, arm, kind string, rs []receipts.Receipt) (Log, error) {
	da, ok := designArm(x.Design, arm)
	if !ok {
		return Log{}, fmt.Errorf("execution %s: receipts name arm %q, which the frozen design does not declare", x.ID, arm)
	}
	jk, ok := designKind(x.Design, kind)
	if !ok {
		return Log{}, fmt.Errorf("execution %s: receipts name job kind %q, which the frozen design does not declare", x.ID, kind)
	}
	bank, ok := x.Banks[kind]
	if !ok {
		return Log{}, fmt.Errorf("execution %s: no frozen bank for job kind %q", x.ID, kind)
	}
	model := string(da.Runtime) + "/" + da.Model.RegistryName
	trials := trialsOf(rs)
	first := 0
	for _, t := range trials {
		if t.repeat == 0 {
			first = 1 // receipts numbered from 0: Inspect's epochs start at 1
		}
	}
	rows := indexRows(x.Rows[arm])
	var samples []Sample
	for _, t := range trials {
		s, err := buildSample(x, model, jk.RankingMeasure.Name, bank, t, t.repeat+first, rows)
		if err != nil {
			return Log{}, err
		}
		samples = append(samples, s)
	}
	last := rs[0]
	for _, r := range rs {
		if r.Attempt > last.Attempt || (r.Attempt == last.Attempt && r.FinishedAt.After(last.FinishedAt)) {
			last = r
		}
	}
	l := Log{
		Version: FormatVersion, Status: "success",
		Eval:     spec(x, arm, kind, model, da, bank, trials, last, rows),
		Plan:     Plan{Name: "plan", Steps: []PlanStep{{Solver: "rig/" + string(da.Runtime), Params: map[string]any{"arm": arm}, ParamsPassed: map[string]any{}}}, Config: map[string]any{}},
		Stats:    stats(model, rs, samples),
		Tags:     []string{"rig", "study:" + x.Study, "execution:" + x.ID},
		Metadata: map[string]any{},
		Samples:  samples,
	}
	grader := jk.Grader.Name
	for _, r := range rs {
		if r.Grade != nil {
			grader = r.Grade.Grader
			break
		}
	}
	l.Results, l.Reductions = results(jk.RankingMeasure.Name, grader, samples)
	return l, nil
}

func designArm(d *studies.Design, name string) (studies.Arm, bool) {
	for _, a := range d.Arms {
		if a.Name == name {
			return a, true
		}
	}
	return studies.Arm{}, false
}

func designKind(d *studies.Design, name string) (studies.JobKind, bool) {
	for _, k := range d.JobKinds {
		if k.Name == name {
			return k, true
		}
	}
	return studies.JobKind{}, false
}

// indexRows maps a call id to its rows: a trial's call is the row whose id
// is the call id, or whose id begins with it and "/" (a harness's several
// calls).
func indexRows(rows []genrecord.Row) map[string][]genrecord.Row {
	m := map[string][]genrecord.Row{}
	for _, r := range rows {
		id := r.RowID
		if i := strings.Index(id, "#"); i >= 0 {
			if j := strings.Index(id[i:], "/"); j >= 0 {
				id = id[:i+j]
			}
		}
		m[id] = append(m[id], r)
	}
	return m
}

func callID(r receipts.Receipt) string {
	return studies.TrialKey{Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat}.CallID(r.Attempt)
}

// isoTime is Inspect's UTC ISO 8601 form (Python's isoformat).
func isoTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000+00:00")
}

// stableID is a deterministic id of the parts: the same execution gives the
// same ids, so its logs are byte for byte the same.
func stableID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:11])
}

// keyText is a task's key as a sample's target: a JSON string as its text,
// anything else as its compact JSON.
func keyText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			return string(b)
		}
	}
	return string(raw)
}
