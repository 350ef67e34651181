package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// errNoTasks means the bank has nothing to validate with.
var errNoTasks = errors.New("bank has no tasks")

// Validate makes, in dir, one free validation run per harness (llama-server, ollama,
// aider) before counted runs: it checks that the records are right and that
// the native-runtime and containment checks read correctly. Nothing it does is
// counted.
func Validate(ctx context.Context, env Env, study string, snap *studies.Snapshot, dir string, w io.Writer) ([]ValidationRecord, error) {
	env.Log = env.log()
	d, err := snap.DesignValue()
	if err != nil {
		return nil, err
	}
	name := study
	seen := map[string]bool{}
	var out []ValidationRecord
	var prev []ValidationRecord
	_ = atomicfile.ReadJSON(layout.Records(dir).ValidationRecord(), &prev) // none yet is fine
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The validation's own runner: no banks of the plan, its own short
	// caps, and nothing it does goes to a store.
	x := &trialRunner{env: env, study: name, design: d, snap: snap, installed: env.Installed, graders: env.Graders(),
		topK: max(d.TopK, studies.DefaultTopK), workDir: dir, exec: receipts.Execution{ID: "validation"}, validating: true}
	// A harness that passed on this snapshot keeps its record: a demo or a
	// study resumed after one harness failed reruns only that harness.
	passedBefore := map[string]ValidationRecord{}
	for _, v := range prev {
		if v.Pass && v.Snapshot == snap.Hash {
			passedBefore[v.Harness] = v
		}
	}
	for _, arm := range d.Arms {
		// One validation per runtime: each server, and each server under
		// Aider; each generic server a design describes on its own.
		h := ValidationHarness(d, arm)
		if seen[h] {
			continue
		}
		seen[h] = true
		if v, ok := passedBefore[h]; ok {
			fmt.Fprintf(w, "validation %-22s already passed at %s (arm %s)\n", v.Harness, v.At.Format(time.RFC3339), v.Arm)
			out = append(out, v)
			continue
		}
		rec, err := x.validateHarness(ctx, h, arm, dir, w)
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
	return out, saveValidationVerdict(dir, out)
}

// ValidationHarness is what one validation run stands for: the arm's
// runtime, and for a generic server (with Aider over it or not) which one,
// since two openai-server arms may start different servers (llama-server's
// /v1 and llama-cpp-python) whose records and caps are checked apart. Arms
// whose server blocks are the same share one run, named by the first of
// them in the design: "openai-server (server of ARM)".
func ValidationHarness(d *studies.Design, arm studies.Arm) string {
	h := string(arm.Runtime)
	if arm.Server == nil {
		return h
	}
	key, _ := json.Marshal(arm.Server)
	for _, a := range d.Arms {
		if other, _ := json.Marshal(a.Server); a.Runtime == arm.Runtime && string(other) == string(key) {
			return fmt.Sprintf("%s (server of %s)", h, a.Name)
		}
	}
	return h
}

// validateHarness makes the free validation run of arm's harness h and checks
// what it recorded; an error means the run could not be made at all.
func (x *trialRunner) validateHarness(ctx context.Context, h string, arm studies.Arm, dir string, w io.Writer) (ValidationRecord, error) {
	// The validation's own stop cap: short by construction, on any machine.
	arm.Pins.StopCap = min(arm.Pins.StopCap, studies.ValidationStopCap)
	rec := ValidationRecord{Snapshot: x.snap.Hash, Harness: h, Arm: arm.Name, At: time.Now().UTC(),
		Caps: fmt.Sprintf("one task, one call of at most %d output tokens", arm.Pins.StopCap)}
	if arm.Runtime.Aider() {
		rec.Caps = "one task, " + studies.DescribeCaps(studies.ValidationCaps)
	}
	fmt.Fprintf(w, "validation %-22s arm %-28s running (%s) ...\n", h, arm.Name, rec.Caps)
	rt, err := x.startArm(ctx, arm)
	if err != nil {
		x.stopArm(ctx, nil)
		return rec, fmt.Errorf("validation run of %s (arm %s): %w", h, arm.Name, err)
	}
	rec.Containment = rt.Pins().Containment
	if c := rt.Pins().ServerCaps; c != "" {
		// A generic server's pins as it reported using them at its start.
		fmt.Fprintf(w, "validation %-22s arm %-28s server caps: %s\n", h, arm.Name, c)
	}
	jobKind, bank, task, err := x.validationTask(arm)
	if err != nil {
		x.stopArm(ctx, rt)
		return rec, err
	}
	gen, genErr := x.generate(ctx, arm, rt, jobKind, bank, task, "validation/"+arm.Name, 0)
	pins := rt.Pins()
	x.stopArm(ctx, rt)
	if genErr != nil {
		rec.Problems = append(rec.Problems, "generation failed: "+genErr.Error())
	}
	rec.Problems = append(rec.Problems, x.containmentProblems(rec.Containment, gen)...)
	path := layout.Records(dir).Generation(arm.Name)
	os.Remove(path)
	if len(gen.calls) == 0 && genErr == nil {
		rec.Problems = append(rec.Problems, noCallProblem(arm, rec.Caps, gen))
	}
	rec.Speed = measuredSpeed(gen)
	if len(gen.calls) > 0 {
		if err := x.writeValidationRecord(&rec, path, arm, pins, gen); err != nil {
			return rec, err
		}
	}
	rec.Pass = len(rec.Problems) == 0
	printValidation(w, rec, gen)
	return rec, nil
}

// validationTask is the one task the validation runs on arm: the first task
// of the first job kind the arm runs, from its bank as frozen.
func (x *trialRunner) validationTask(arm studies.Arm) (string, *tasks.Bank, tasks.Task, error) {
	var jk studies.JobKind
	for _, k := range x.design.JobKinds {
		if len(arm.JobKinds) == 0 || slices.Contains(arm.JobKinds, k.Name) {
			jk = k
			break
		}
	}
	bankPath := jk.TaskBank
	for _, fb := range x.snap.Banks {
		if fb.JobKind == jk.Name {
			bankPath = fb.Path // as frozen: resolved from the design's folder
		}
	}
	bank, err := tasks.LoadBank(bankPath)
	if err != nil {
		return "", nil, tasks.Task{}, err
	}
	sel := bank.Select(false)
	if len(sel) == 0 {
		return "", nil, tasks.Task{}, fmt.Errorf("%s: %w", bankPath, errNoTasks)
	}
	return jk.Name, bank, sel[0], nil
}

// containmentProblems are what the containment checks of the server (and of
// Aider, where it ran sandboxed) found wrong.
func (x *trialRunner) containmentProblems(c runtimes.Containment, gen trialOutput) []string {
	var problems []string
	if !x.env.NoSandbox && !c.LoopbackOnly {
		problems = append(problems, "containment check did not read loopback-only: "+strings.Join(c.Violations, "; "))
	}
	if !x.env.NoSandbox {
		for _, p := range c.Confinement.Problems() {
			problems = append(problems, "containment: "+p)
		}
		if gen.aider != nil && gen.aider.Containment.Sandboxed {
			for _, p := range gen.aider.Containment.Confinement.Problems() {
				problems = append(problems, "aider's containment: "+p)
			}
		}
	}
	if x.env.NoSandbox {
		problems = append(problems, "running with --no-sandbox: containment not established (recorded on every receipt)")
	}
	return problems
}

// noCallProblem says why a run that did not fail made no model call; for
// Aider, what Aider itself reported.
func noCallProblem(arm studies.Arm, caps string, gen trialOutput) string {
	if !arm.Runtime.Aider() {
		return "no model call was recorded"
	}
	why := "it made no model call"
	if gen.aider != nil {
		why = "aider: " + gen.aider.Describe()
		if gen.aider.LogTail != "" {
			why += "; its log ends: " + strings.Join(strings.Fields(gen.aider.LogTail), " ")
		}
	}
	return fmt.Sprintf("%s answered no model call within the validation's caps (%s), so this run shows no record: %s", arm.Runtime, caps, studies.Clip(why, 2000))
}

// writeValidationRecord writes the run's calls to a generation record at
// path and reads it back, adding to rec what is wrong with either.
func (x *trialRunner) writeValidationRecord(rec *ValidationRecord, path string, arm studies.Arm, pins runtimes.Pins, gen trialOutput) error {
	wr, err := genrecord.OpenWriter(path, callrow.Pins(pins, x.snap.DesignHash, x.study, "validation"))
	if err != nil {
		return err
	}
	for i, c := range gen.calls {
		if err := wr.Append(generationRow(fmt.Sprintf("validation-%d", i+1), arm.Name, genrecord.RoleCandidate, arm.Pins, x.topK, c)); err != nil {
			rec.Problems = append(rec.Problems, "generation row rejected: "+err.Error())
		}
		if len(c.Steps) > 0 && len(c.Steps[0].Top) != x.topK {
			rec.Problems = append(rec.Problems, fmt.Sprintf("top-K has %d entries, want %d", len(c.Steps[0].Top), x.topK))
		}
	}
	wr.Close()
	if _, rows, err := genrecord.ReadAll(path); err != nil {
		rec.Problems = append(rec.Problems, "generation record does not read back: "+err.Error())
	} else if len(rows) != len(gen.calls) {
		rec.Problems = append(rec.Problems, fmt.Sprintf("generation record holds %d rows, %d calls were made", len(rows), len(gen.calls)))
	}
	rec.Record = path
	return nil
}

// printValidation prints one harness's verdict, its containment and its
// problems.
func printValidation(w io.Writer, rec ValidationRecord, gen trialOutput) {
	fmt.Fprintf(w, "validation %-22s arm %-28s pass=%v", rec.Harness, rec.Arm, rec.Pass)
	if rec.Containment.Sandboxed {
		fmt.Fprintf(w, " netns=%s loopback-only=%v", rec.Containment.NetNS, rec.Containment.LoopbackOnly)
	}
	fmt.Fprintln(w)
	if rec.Containment.Sandboxed {
		fmt.Fprintln(w, "   contained", rec.Containment.Confinement.Summary())
	}
	if gen.aider != nil && gen.aider.Containment.Sandboxed {
		fmt.Fprintln(w, "   aider contained", gen.aider.Containment.Confinement.Summary())
	}
	for _, p := range rec.Problems {
		fmt.Fprintln(w, "   problem:", p)
	}
}

// saveValidationVerdict writes the records to dir and refuses counted runs
// while any harness failed.
func saveValidationVerdict(dir string, out []ValidationRecord) error {
	if err := atomicfile.WriteJSON(layout.Records(dir).ValidationRecord(), out, 0o600); err != nil {
		return err
	}
	var failed []string
	for _, r := range out {
		if !r.Pass {
			failed = append(failed, r.Harness)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("validation failed for %s: counted runs stay refused until it passes (see the problems above)", strings.Join(failed, ", "))
	}
	return nil
}

// ValidationRecord is the free validation run of one harness.
type ValidationRecord struct {
	Snapshot    string               `json:"snapshot"`
	Harness     string               `json:"harness"`
	Arm         string               `json:"arm"`
	At          time.Time            `json:"at"`
	Pass        bool                 `json:"pass"`
	Problems    []string             `json:"problems,omitempty"`
	Containment runtimes.Containment `json:"containment"`
	Record      string               `json:"record"` // the generation record it wrote and checked
	// Caps are the validation's own, the same on every machine: one task,
	// one call, a small token cap. A call stopped by them is still a record.
	Caps string `json:"caps"`
	// Speed is what the run measured on this machine; the dry run prices
	// the plan with it and an auto wall cap is derived from it.
	Speed *studies.Speed `json:"speed,omitempty"`
}
