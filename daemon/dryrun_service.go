package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/run"
	"rig/studies"
)

// DryRun prices the frozen study's whole plan (every arm × task × repeat) in
// wall time and energy and executes nothing. Speeds come from a pilot table
// (speedsFile) or, without one, from this machine's validation run records;
// the table says which. A plan over the design's budget is refused.
func (sr Studies) DryRun(ctx context.Context, name, speedsFile string, w io.Writer) (*studies.Estimate, error) {
	est, d, speeds, err := sr.s.price(ctx, name, speedsFile, w)
	if d == nil {
		return est, err
	}
	if est != nil {
		est.WriteTable(w)
	}
	if len(d.AutoWallJobKinds()) > 0 && est != nil {
		walls, werr := studies.DeriveWalls(d, speeds)
		if werr != nil {
			return est, werr
		}
		for _, name := range d.AutoWallJobKinds() {
			if wd, ok := walls[name]; ok {
				fmt.Fprintln(w, "derived "+wd.String())
			}
		}
	}
	// What approval and the operator set: the baseline the next study
	// starts from and what the month has left.
	if p, ok, berr := sr.s.Proposals().Baseline(); berr == nil && ok {
		fmt.Fprintln(w, BaselineNote(p, d))
	}
	if snap, serr := sr.s.Snapshot(name); serr == nil {
		// The rule's fate on the plan just priced (rulefate.go).
		if f := run.FateOfRule(d, snap.Tasks()); f.Certain {
			fmt.Fprintln(w, "warning: "+f.Warning)
		}
	}
	if m, merr := sr.s.Budget().Month(ctx, time.Now()); merr == nil {
		fmt.Fprintln(w, m.String())
		if est != nil {
			if cerr := checkMonth(m, est.WallTime.Seconds(), est.EnergyWh, "the estimate above"); cerr != nil {
				fmt.Fprintln(w, "a run would be refused: "+cerr.Error())
			}
		}
	}
	return est, err
}

// price builds the frozen study's plan and prices it: at the speeds of a
// pilot table (speedsFile) or of this machine's validation runs. The design
// is returned whenever it was read, the estimate whenever the plan was
// priced (with an over-budget error beside it), with the speeds it used.
func (s *Service) price(ctx context.Context, name, speedsFile string, w io.Writer) (*studies.Estimate, *studies.Design, studies.SpeedTable, error) {
	snap, d, err := s.frozen(name)
	if err != nil {
		return nil, nil, nil, err
	}
	plan, err := studies.NewPlan(d, snap.Tasks(), studies.PlanOptions{Seed: studies.PlanSeed(snap.Hash, 1)})
	if err != nil {
		return nil, d, nil, err
	}
	speeds, err := s.speeds(ctx, name, d, speedsFile, w)
	if err != nil {
		return nil, d, nil, err
	}
	est, err := studies.DryRun(d, plan, speeds, nil)
	if est != nil {
		// The stopping rule's expected price simulates the analysis's
		// monitor, which studies does not import, so it is added here, on
		// the plan just priced; the caps were held to the whole plan.
		sp, serr := run.PriceStopping(ctx, d, plan, est)
		if serr != nil {
			return nil, d, speeds, serr
		}
		est.Stopping = sp
	}
	return est, d, speeds, err
}

// speeds reads the pilot table, or this machine's measured speeds.
func (s *Service) speeds(ctx context.Context, name string, d *studies.Design, speedsFile string, w io.Writer) (studies.SpeedTable, error) {
	if speedsFile == "" {
		return s.measuredSpeeds(name, d, w)
	}
	// A pilot table the caller names is read as the caller could (callerfiles.go).
	raw, err := s.readAsCaller(ctx, "--speeds", speedsFile)
	if err != nil {
		return nil, err
	}
	return studies.ParseSpeedTable(speedsFile, raw)
}

// measuredSpeeds reads each arm's generation speed from its validation run on
// this machine. Harnesses share their runtime's measurement; a harness adds
// its own per-trial overhead from the validation's wall time.
func (s *Service) measuredSpeeds(name string, d *studies.Design, w io.Writer) (studies.SpeedTable, error) {
	sd, err := s.study(name)
	if err != nil {
		return nil, err
	}
	byRuntime := map[studies.Runtime]studies.Speed{}
	measuredBy := map[studies.Runtime]string{}
	var vals []run.ValidationRecord
	_ = atomicfile.ReadJSON(sd.ValidationRecord(), &vals)
	timed := map[string]studies.Speed{}
	for _, v := range vals {
		if v.Speed != nil {
			timed[v.Arm] = *v.Speed
		}
	}
	for _, a := range d.Arms {
		if sp, ok := timed[a.Name]; ok {
			// The runtime's own prompt and output timings, kept by the
			// validation run.
			byRuntime[a.Runtime] = sp
			measuredBy[a.Runtime] = a.Name
			continue
		}
		path := layout.Records(sd.Validation()).Generation(a.Name)
		_, rows, err := genrecord.ReadAll(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var tokens, ms float64
		for _, r := range rows {
			tokens += float64(r.RuntimeTokenCount)
			ms += r.WallMS
		}
		if tokens == 0 || ms == 0 {
			continue
		}
		sp := studies.Speed{GenTokensPerSec: tokens / (ms / 1000), PromptTokensPerSec: 10 * tokens / (ms / 1000), LoadSeconds: 5,
			Watts: studies.EstimatedWatts, Source: studies.SourceMeasured}
		if a.Runtime.Aider() {
			sp.OverheadSeconds = 10
		}
		byRuntime[a.Runtime] = sp
		measuredBy[a.Runtime] = a.Name
	}
	out := studies.SpeedTable{}
	var missing []string
	for _, a := range d.Arms {
		sp, ok := byRuntime[a.Runtime]
		if !ok {
			missing = append(missing, a.Name)
			continue
		}
		if measuredBy[a.Runtime] != a.Name {
			fmt.Fprintf(w, "note: %s is priced at %s's speed, measured in the validation run of %s\n", a.Name, measuredBy[a.Runtime], a.Runtime)
		}
		out[a.Name] = sp
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no measured speed for %s: run rig study validate %s first, or pass --speeds with a pilot's table", strings.Join(missing, ", "), name)
	}
	return out, nil
}
