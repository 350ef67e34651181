package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"rig/internal/atomicfile"
	"rig/internal/gguf"
	"rig/preflight"
	"rig/run"
	"rig/studies"
)

// Preflight decides, for every arm at the study's card profile, whether it
// fits, and stores each verdict before any run. "Doesn't fit" is decided here,
// never mid-run; the arm is never downgraded to make it fit.
func (sr Studies) Preflight(ctx context.Context, name string, w io.Writer) ([]preflight.Verdict, error) {
	snap, d, err := sr.s.frozen(name)
	if err != nil {
		return nil, err
	}
	st, err := sr.s.store(name)
	if err != nil {
		return nil, err
	}
	cal, err := preflight.DefaultCalibration()
	if err != nil {
		return nil, err
	}
	var out []preflight.Verdict
	for _, a := range d.Arms {
		fa, _ := snap.Arm(a.Name)
		p := studies.PreflightProfile(d, a)
		if raw, err := st.Preflight(ctx, a.Name, p.Name); err == nil && raw != nil {
			var v preflight.Verdict
			if json.Unmarshal(raw, &v) == nil {
				fmt.Fprintf(w, "%s: already decided at %s: %s\n", a.Name, v.DecidedAt.Format(time.RFC3339), v.Outcome)
				out = append(out, v)
				continue
			}
		}
		f, err := gguf.Open(fa.ModelPath)
		if err != nil {
			return out, err
		}
		// A generic server (openai-server, under Aider or not) is sized from
		// the GGUF alone, and its verdict says so (preflight/server.go).
		est, err := preflight.Predict(f, p, a.Runtime.Engine(), cal)
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

// checkGates refuses a counted run unless every arm has a recorded "fits"
// preflight verdict, the governor is ready, and every harness has passed its
// validation run. Each gate fails closed with what to run.
func (ex Executions) checkGates(ctx context.Context, name string, snap *studies.Snapshot) error {
	d, err := snap.DesignValue()
	if err != nil {
		return err
	}
	st, err := ex.s.store(name)
	if err != nil {
		return err
	}
	var problems []string
	fitting := 0
	for _, a := range d.Arms {
		p := studies.PreflightProfile(d, a)
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
	if ex.s.Gates == nil {
		problems = append(problems, "no governor is running (start rig daemon, which runs the governor)")
	} else if err := ex.s.Gates.Ready(ctx); err != nil {
		problems = append(problems, "governor: "+err.Error())
	}
	var vals []run.ValidationRecord
	sd, err := ex.s.study(name)
	if err != nil {
		return err
	}
	if err := atomicfile.ReadJSON(sd.ValidationRecord(), &vals); err != nil {
		problems = append(problems, fmt.Sprintf("no validation run recorded (run: rig study validate %s)", name))
	} else {
		passed := map[string]bool{}
		for _, v := range vals {
			passed[v.Harness] = v.Pass
		}
		var need []string
		for _, a := range d.Arms {
			h := run.ValidationHarness(d, a) // validated once per runtime (and generic server)
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
		return fmt.Errorf("%w: study %s cannot start a counted run:\n  - %s", run.ErrGate, name, strings.Join(problems, "\n  - "))
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

// Validate makes one free validation run per harness of the frozen study
// (see run.Validate); its records gate counted runs and give the speeds an
// auto wall is derived from.
func (sr Studies) Validate(ctx context.Context, name string, w io.Writer) ([]run.ValidationRecord, error) {
	snap, err := sr.s.Snapshot(name)
	if err != nil {
		return nil, err
	}
	env, err := sr.s.runEnv()
	if err != nil {
		return nil, err
	}
	sd, err := sr.s.study(name)
	if err != nil {
		return nil, err
	}
	defer sr.s.activity.set(name, "")
	return run.Validate(ctx, env, name, snap, sd.Validation(), &activityWriter{w: w, a: &sr.s.activity, study: name})
}
