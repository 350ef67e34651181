package studies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"rig/genrecord"
	"rig/preflight"
	"rig/receipts"
	"rig/runtimes"
	"rig/tasks"
)

// cardProfile turns the design's card profile and an arm's pins into the
// preflight's profile.
func cardProfile(d *Design, a Arm) preflight.Profile {
	card := cardOf(d, a)
	p := preflight.Profile{
		Name:          card.Name,
		CardMemory:    preflight.Size(card.MemoryMiB) * preflight.MiB,
		Context:       a.Pins.Context,
		Quant:         a.Pins.Quant,
		KVType:        "f16",
		OffloadLayers: preflight.OffloadAll,
		Parallel:      1,
		Simulated:     card.Simulated,
	}
	if card.OffloadLayers != nil {
		p.OffloadLayers = *card.OffloadLayers
	}
	return p
}

// Preflight decides, for every arm at the study's card profile, whether it
// fits, and stores each verdict before any run. "Doesn't fit" is decided here,
// never mid-run; the arm is never downgraded to make it fit.
func (s *Service) Preflight(ctx context.Context, name string, w io.Writer) ([]preflight.Verdict, error) {
	snap, err := s.Snapshot(name)
	if err != nil {
		return nil, err
	}
	d, err := ParseDesign(name+"/snapshot.json", snap.Design)
	if err != nil {
		return nil, err
	}
	st, err := s.store(name)
	if err != nil {
		return nil, err
	}
	cal, err := preflight.DefaultCalibration()
	if err != nil {
		return nil, err
	}
	var out []preflight.Verdict
	for _, a := range d.Arms {
		fa, _ := frozenArmOf(snap, a.Name)
		p := cardProfile(d, a)
		if raw, err := st.Preflight(ctx, a.Name, p.Name); err == nil && raw != nil {
			var v preflight.Verdict
			if json.Unmarshal(raw, &v) == nil {
				fmt.Fprintf(w, "%s: already decided at %s: %s\n", a.Name, v.DecidedAt.Format(time.RFC3339), v.Outcome)
				out = append(out, v)
				continue
			}
		}
		f, err := preflight.Open(fa.ModelPath)
		if err != nil {
			return out, err
		}
		est, err := preflight.Predict(f, p, baseRuntime(a.Runtime), cal)
		if err != nil {
			return out, err
		}
		v := preflight.Decide(est, p, time.Now().UTC())
		raw, err := v.JSON()
		if err != nil {
			return out, err
		}
		if err := st.PutPreflight(ctx, a.Name, p.Name, raw); err != nil {
			return out, err
		}
		fmt.Fprintf(w, "== %s (%s on %s)\n", a.Name, a.Model.RegistryName, a.Runtime)
		v.Print(w)
		out = append(out, v)
	}
	return out, nil
}

func frozenArmOf(snap *Snapshot, name string) (FrozenArm, bool) {
	for _, a := range snap.Arms {
		if a.Name == name {
			return a, true
		}
	}
	return FrozenArm{}, false
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
	Speed *Speed `json:"speed,omitempty"`
}

// Validate makes one free validation run per harness (llama-server, ollama,
// aider) before counted runs: it checks that the records are right and that
// the native-runtime and containment checks read correctly. Nothing it does is
// counted.
func (s *Service) Validate(ctx context.Context, name string, w io.Writer) ([]ValidationRecord, error) {
	snap, err := s.Snapshot(name)
	if err != nil {
		return nil, err
	}
	d, err := ParseDesign(name+"/snapshot.json", snap.Design)
	if err != nil {
		return nil, err
	}
	a, err := s.assets()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []ValidationRecord
	dir := filepath.Join(s.Dir(name), "validation")
	var prev []ValidationRecord
	_ = readJSON(filepath.Join(dir, "validation.json"), &prev) // none yet is fine
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	x := &execution{svc: s, study: name, design: d, snap: snap, installed: a.installed, graders: a.graders,
		topK: max(d.TopK, DefaultTopK), writers: map[string]*genrecord.Writer{}, workDir: dir, recDir: dir,
		exec: receipts.Execution{ID: "validation"}, validating: true}
	// A harness that passed on this snapshot keeps its record: a demo or a
	// study resumed after one harness failed reruns only that harness.
	passedBefore := map[string]ValidationRecord{}
	for _, v := range prev {
		if v.Pass && v.Snapshot == snap.Hash {
			passedBefore[v.Harness] = v
		}
	}
	for _, arm := range d.Arms {
		h := harnessOf(arm.Runtime)
		if h == "aider" {
			h = arm.Runtime
		}
		if seen[h] {
			continue
		}
		seen[h] = true
		if v, ok := passedBefore[h]; ok {
			fmt.Fprintf(w, "validation %-22s already passed at %s (arm %s)\n", v.Harness, v.At.Format(time.RFC3339), v.Arm)
			out = append(out, v)
			continue
		}
		// The validation's own stop cap: short by construction, on any machine.
		arm.Pins.StopCap = min(arm.Pins.StopCap, validationStopCap)
		rec := ValidationRecord{Snapshot: snap.Hash, Harness: h, Arm: arm.Name, At: time.Now().UTC(),
			Caps: fmt.Sprintf("one task, one call of at most %d output tokens", arm.Pins.StopCap)}
		if harnessOf(arm.Runtime) == "aider" {
			rec.Caps = "one task, " + describeCaps(validationCaps)
		}
		fmt.Fprintf(w, "validation %-22s arm %-28s running (%s) ...\n", h, arm.Name, rec.Caps)
		rt, err := x.startArm(ctx, arm)
		if err != nil {
			x.stopArm(ctx, nil)
			return out, fmt.Errorf("validation run of %s (arm %s): %w", h, arm.Name, err)
		}
		rec.Containment = rt.Pins().Containment
		var jk JobKind
		for _, k := range d.JobKinds {
			if len(arm.JobKinds) == 0 || contains(arm.JobKinds, k.Name) {
				jk = k
				break
			}
		}
		bankPath := jk.TaskBank
		for _, fb := range snap.Banks {
			if fb.JobKind == jk.Name {
				bankPath = fb.Path // as frozen: resolved from the design's folder
			}
		}
		bank, err := tasks.LoadBank(bankPath)
		if err != nil {
			x.stopArm(ctx, rt)
			return out, err
		}
		sel := bank.Select(false)
		if len(sel) == 0 {
			x.stopArm(ctx, rt)
			return out, fmt.Errorf("%s: %w", bankPath, errNoTasks)
		}
		task := sel[0]
		gen, genErr := x.generate(ctx, arm, rt, jk.Name, task, "validation/"+arm.Name)
		pins := rt.Pins()
		x.stopArm(ctx, rt)
		if genErr != nil {
			rec.Problems = append(rec.Problems, "generation failed: "+genErr.Error())
		}
		if !s.NoSandbox && !rec.Containment.LoopbackOnly {
			rec.Problems = append(rec.Problems, "containment check did not read loopback-only: "+strings.Join(rec.Containment.Violations, "; "))
		}
		if s.NoSandbox {
			rec.Problems = append(rec.Problems, "running with --no-sandbox: containment not established (recorded on every receipt)")
		}
		path := filepath.Join(dir, "generations-"+arm.Name+".jsonl")
		os.Remove(path)
		if len(gen.calls) == 0 && genErr == nil {
			if h == arm.Runtime { // a harness over a runtime: Aider
				why := "it made no model call"
				if gen.aider != nil {
					why = "aider: " + gen.aider.Describe()
					if gen.aider.LogTail != "" {
						why += "; its log ends: " + strings.Join(strings.Fields(gen.aider.LogTail), " ")
					}
				}
				rec.Problems = append(rec.Problems, fmt.Sprintf("%s answered no model call within the validation's caps (%s), so this run shows no record: %s", arm.Runtime, rec.Caps, clip(why, 2000)))
			} else {
				rec.Problems = append(rec.Problems, "no model call was recorded")
			}
		}
		rec.Speed = measuredSpeed(gen)
		if len(gen.calls) > 0 {
			wr, err := genrecord.OpenWriter(path, recordPins(pins, snap.DesignHash, name, "validation"))
			if err != nil {
				return out, err
			}
			for i, c := range gen.calls {
				if err := wr.Append(toRow(fmt.Sprintf("validation-%d", i+1), arm.Name, genrecord.RoleCandidate, arm.Pins, x.topK, c)); err != nil {
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
		}
		rec.Pass = len(rec.Problems) == 0
		fmt.Fprintf(w, "validation %-22s arm %-28s pass=%v", h, arm.Name, rec.Pass)
		if rec.Containment.Sandboxed {
			fmt.Fprintf(w, " netns=%s loopback-only=%v", rec.Containment.NetNS, rec.Containment.LoopbackOnly)
		}
		fmt.Fprintln(w)
		for _, p := range rec.Problems {
			fmt.Fprintln(w, "   problem:", p)
		}
		out = append(out, rec)
	}
	if err := writeJSONAtomic(filepath.Join(dir, "validation.json"), out, 0o600); err != nil {
		return out, err
	}
	var failed []string
	for _, r := range out {
		if !r.Pass {
			failed = append(failed, r.Harness)
		}
	}
	if len(failed) > 0 {
		return out, fmt.Errorf("validation failed for %s: counted runs stay refused until it passes (see the problems above)", strings.Join(failed, ", "))
	}
	return out, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// checkGates refuses a counted run unless every arm has a recorded "fits"
// preflight verdict, the governor is ready, and every harness has passed its
// validation run. Each gate fails closed with what to run.
func (s *Service) checkGates(ctx context.Context, name string, snap *Snapshot) error {
	d, err := ParseDesign(name+"/snapshot.json", snap.Design)
	if err != nil {
		return err
	}
	st, err := s.store(name)
	if err != nil {
		return err
	}
	var problems []string
	fitting := 0
	for _, a := range d.Arms {
		p := cardProfile(d, a)
		raw, err := st.Preflight(ctx, a.Name, p.Name)
		if err != nil || raw == nil {
			problems = append(problems, fmt.Sprintf("arm %s has no preflight verdict at card %s (run: rig study preflight %s)", a.Name, p.Name, name))
			continue
		}
		var v preflight.Verdict
		if err := json.Unmarshal(raw, &v); err != nil {
			problems = append(problems, fmt.Sprintf("arm %s: stored preflight verdict unreadable: %v", a.Name, err))
			continue
		}
		switch {
		case v.Fits:
			fitting++
		case d.IsCardStudy():
			// In the card sub-study "doesn't fit" is a result, not a refusal.
		default:
			problems = append(problems, fmt.Sprintf("arm %s doesn't fit at card %s: %s (a step-down profile is a different arm, in the card sub-study)", a.Name, p.Name, v.Reason))
		}
	}
	if d.IsCardStudy() && fitting == 0 && len(problems) == 0 {
		problems = append(problems, "no cell of the card sub-study fits at its card: there is nothing to run (add a larger profile)")
	}
	if s.Gates == nil {
		problems = append(problems, "no governor is running (start rig daemon, which runs the governor)")
	} else if err := s.Gates.Ready(ctx); err != nil {
		problems = append(problems, "governor: "+err.Error())
	}
	var vals []ValidationRecord
	if err := readJSON(filepath.Join(s.Dir(name), "validation", "validation.json"), &vals); err != nil {
		problems = append(problems, fmt.Sprintf("no validation run recorded (run: rig study validate %s)", name))
	} else {
		passed := map[string]bool{}
		for _, v := range vals {
			passed[v.Harness] = v.Pass
		}
		var need []string
		for _, a := range d.Arms {
			h := harnessOf(a.Runtime)
			if h == "aider" {
				h = a.Runtime
			}
			if !passed[h] {
				need = append(need, h)
			}
		}
		sort.Strings(need)
		if len(need) > 0 {
			problems = append(problems, fmt.Sprintf("harnesses without a passing validation run: %s (run: rig study validate %s)", strings.Join(dedupe(need), ", "), name))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: study %s cannot start a counted run:\n  - %s", ErrGate, name, strings.Join(problems, "\n  - "))
	}
	return nil
}

func dedupe(xs []string) []string {
	var out []string
	for i, x := range xs {
		if i == 0 || xs[i-1] != x {
			out = append(out, x)
		}
	}
	return out
}

var errNoTasks = errors.New("bank has no tasks")

// clip keeps a message readable in a table or a problem line.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
