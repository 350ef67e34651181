package studies

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"rig/internal/jsonerr"
)

// Sources of a speed figure; the dry run prints which one priced each arm.
const (
	SourcePilot    = "pilot"
	SourceMeasured = "measured on this machine"
)

// Speed is how fast an arm runs, from a pilot or measured on this machine.
type Speed struct {
	GenTokensPerSec    float64 `json:"gen_tokens_per_sec"`
	PromptTokensPerSec float64 `json:"prompt_tokens_per_sec"`
	LoadSeconds        float64 `json:"load_seconds"`     // one model load
	OverheadSeconds    float64 `json:"overhead_seconds"` // per trial: harness start, grading
	Watts              float64 `json:"watts"`            // mean draw while running
	// MeanOutputTokens prices output from the pilot; 0 prices every trial
	// at its stop cap, the worst case.
	MeanOutputTokens float64 `json:"mean_output_tokens,omitempty"`
	// PromptTokens is a harness's first prompt as measured (Aider's system
	// prompt and files); it prices the derived wall of an auto wall cap.
	PromptTokens float64 `json:"prompt_tokens,omitempty"`
	Source       string  `json:"source"`
}

// check returns the first figure a dry run cannot price with, by its JSON
// key, and what to do about it; "" when every figure is usable.
func (s Speed) check() (key, problem string) {
	for _, f := range []struct {
		key      string
		v        float64
		positive bool
	}{
		{"gen_tokens_per_sec", s.GenTokensPerSec, true}, {"prompt_tokens_per_sec", s.PromptTokensPerSec, true},
		{"load_seconds", s.LoadSeconds, false}, {"overhead_seconds", s.OverheadSeconds, false}, {"watts", s.Watts, false},
		{"mean_output_tokens", s.MeanOutputTokens, false}, {"prompt_tokens", s.PromptTokens, false},
	} {
		switch {
		case math.IsNaN(f.v) || math.IsInf(f.v, 0):
			return f.key, fmt.Sprintf("%v is not a number (give the figure a pilot measured)", f.v)
		case f.positive && f.v <= 0:
			return f.key, fmt.Sprintf("%v must be above 0 (give the rate a pilot measured, in tokens per second; a missing key reads as 0)", f.v)
		case f.v < 0:
			return f.key, fmt.Sprintf("%v must be 0 or more", f.v)
		}
	}
	return "", ""
}

// SpeedTable holds a Speed per arm name.
type SpeedTable map[string]Speed

// DefaultPromptTokens prices a trial whose prompt size is unknown.
const DefaultPromptTokens = 512

// ArmCost is one arm's share of the priced plan.
type ArmCost struct {
	Arm       string        `json:"arm"`
	Source    string        `json:"source"`
	Trials    int           `json:"trials"`
	Loads     int           `json:"loads"`
	WallTime  time.Duration `json:"wall_time"`
	EnergyWh  float64       `json:"energy_wh"`
	AtStopCap bool          `json:"at_stop_cap"` // output priced at the stop cap
	// Slots is the arm's pins.slots; SlotSpeedup the throughput its trials
	// in flight were priced at, over one slot's (SlotSpeedup), 1 at one slot.
	Slots       int     `json:"slots,omitempty"`
	SlotSpeedup float64 `json:"slot_speedup,omitempty"`
}

// Estimate is a dry run's price of a plan against the design's caps.
type Estimate struct {
	Arms        []ArmCost     `json:"arms"`
	Trials      int           `json:"trials"`
	Loads       int           `json:"loads"`
	WallTime    time.Duration `json:"wall_time"`
	EnergyWh    float64       `json:"energy_wh"`
	CapWallTime time.Duration `json:"cap_wall_time"`
	CapEnergyWh float64       `json:"cap_energy_wh"`
	// Stopping is the expected price with the design's stopping rule; nil
	// without one (the whole plan always runs). DryRun leaves it nil: it is
	// a simulation of the analysis, which run.PriceStopping runs.
	Stopping *StoppingPrice `json:"stopping,omitempty"`
}

// ErrOverBudget classifies a plan priced over a cap; see *OverBudgetError.
var ErrOverBudget = errors.New("plan over budget")

// ErrNoSpeed is an arm the speed table does not price.
var ErrNoSpeed = errors.New("no speed for arm")

// OverBudgetError refuses a plan before anything runs.
type OverBudgetError struct {
	Over []string // e.g. "wall time 3h10m > cap 2h"
}

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("plan over budget: %s; nothing was run (cut repeats, arms or tasks, or raise budget in the design and register it again)",
		strings.Join(e.Over, ", "))
}

// Is makes errors.Is(err, ErrOverBudget) true.
func (e *OverBudgetError) Is(target error) bool { return target == ErrOverBudget }

// DryRun prices every trial of the plan — prompt, output at the pilot's
// mean or the stop cap, per-trial overhead, and a model load at each switch
// of runtime instance — and executes nothing. It returns the estimate in
// every case it can price, with a *OverBudgetError when the estimate passes
// a cap, so the caller can print the table and refuse. prompt gives a
// trial's prompt tokens; nil prices each at DefaultPromptTokens.
func DryRun(d *Design, p *Plan, speeds SpeedTable, prompt func(TrialKey) int) (*Estimate, error) {
	if err := checkSpeeds(d, speeds); err != nil {
		return nil, err
	}
	wallCap, err := time.ParseDuration(d.Budget.WallTime)
	if err != nil {
		return nil, fmt.Errorf("budget.wall_time %q: %w", d.Budget.WallTime, err)
	}
	costs, order, err := priceTrials(d, p, speeds, prompt)
	if err != nil {
		return nil, err
	}
	priceJudges(d, p, speeds, prompt, costs, &order)
	priceFidelity(d, p, speeds, prompt, costs, &order)
	e := &Estimate{CapWallTime: wallCap, CapEnergyWh: d.Budget.EnergyWh}
	sort.Strings(order)
	for _, name := range order {
		c := costs[name]
		e.Arms = append(e.Arms, *c)
		e.Trials += c.Trials
		e.Loads += c.Loads
		e.WallTime += c.WallTime
		e.EnergyWh += c.EnergyWh
	}
	// The caps are checked against the maximum: a study that never
	// settles runs its whole plan, so the stopping rule's price
	// (run.PriceStopping, added by the caller) changes no refusal.
	var over []string
	if e.WallTime > wallCap {
		over = append(over, fmt.Sprintf("wall time %s > cap %s", e.WallTime.Round(time.Second), wallCap))
	}
	if e.EnergyWh > d.Budget.EnergyWh {
		over = append(over, fmt.Sprintf("energy %.1f Wh > cap %.1f Wh", e.EnergyWh, d.Budget.EnergyWh))
	}
	if len(over) > 0 {
		return e, &OverBudgetError{Over: over}
	}
	return e, nil
}

// checkSpeeds refuses a speed table that lacks an arm the plan prices (a
// judge only where it judges), or whose speed is unlabelled or malformed.
func checkSpeeds(d *Design, speeds SpeedTable) error {
	var missing []string
	for _, a := range d.Arms {
		s, ok := speeds[a.Name]
		if !ok {
			if a.Role != RoleJudge || judges(d, a.Name) {
				missing = append(missing, a.Name)
			}
			continue
		}
		if s.Source != SourcePilot && s.Source != SourceMeasured {
			return fmt.Errorf("speed of arm %q: source %q: say %q or %q", a.Name, s.Source, SourcePilot, SourceMeasured)
		}
		if key, problem := s.check(); key != "" {
			return fmt.Errorf("speed table: %s.%s: %s", a.Name, key, problem)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s (run a pilot, or measure the arm on this machine, and add it to the speed table)", ErrNoSpeed, strings.Join(missing, ", "))
	}
	return nil
}

// priceTrials prices each planned trial at its arm's speed, a load
// wherever the plan switches instance, and returns the cost per arm with
// the arms in the order first met. An arm with slots runs each stretch of
// its trials in a block (what one start of its runtime serves, as the
// runner sends them) n at a time, n the slots or the stretch's length if
// shorter: the stretch's model time is divided by SlotSpeedup(n) and its
// per-trial overhead (harness start, grading) by n, which overlaps fully.
func priceTrials(d *Design, p *Plan, speeds SpeedTable, prompt func(TrialKey) int) (map[string]*ArmCost, []string, error) {
	costs := map[string]*ArmCost{}
	var order []string
	prev := ""
	for lo := 0; lo < len(p.Trials); {
		t := p.Trials[lo]
		a := d.Arm(t.Key.Arm)
		if a == nil {
			return nil, nil, fmt.Errorf("plan names arm %q, which the design lacks (plan and design differ; rebuild the plan)", t.Key.Arm)
		}
		hi := lo + 1
		for hi < len(p.Trials) && p.Trials[hi].Key.Arm == t.Key.Arm && p.Trials[hi].Block == t.Block && p.Trials[hi].Instance == t.Instance {
			hi++
		}
		s := speeds[a.Name]
		c, ok := costs[a.Name]
		if !ok {
			c = &ArmCost{Arm: a.Name, Source: s.Source, Slots: a.Pins.SlotCount(), SlotSpeedup: SlotSpeedup(a.Pins.SlotCount())}
			costs[a.Name] = c
			order = append(order, a.Name)
		}
		n := min(a.Pins.SlotCount(), hi-lo)
		var model, overhead float64
		for _, t := range p.Trials[lo:hi] {
			in := DefaultPromptTokens
			if prompt != nil {
				in = prompt(t.Key)
			}
			out := s.MeanOutputTokens
			if out == 0 {
				out = float64(a.Pins.StopCap)
				c.AtStopCap = true
			}
			model += float64(in)/s.PromptTokensPerSec + out/s.GenTokensPerSec
			overhead += s.OverheadSeconds
		}
		secs := model/SlotSpeedup(n) + overhead/float64(n)
		if t.Instance != prev {
			secs += s.LoadSeconds
			c.Loads++
			prev = t.Instance
		}
		c.Trials += hi - lo
		c.WallTime += time.Duration(secs * float64(time.Second))
		c.EnergyWh += secs * s.Watts / 3600
		lo = hi
	}
	return costs, order, nil
}

// SlotSpeedup is what the dry run takes n trials in flight on one runtime
// to buy: their tokens per second over one trial's alone. It is not
// measured per machine (no validation run sends a batch), so it is the
// low end of what `rig bench slots` measured: on a 2-core CPU llama-server
// gained 1.13× at 2 slots and 1.36× at 4, and 1.29× at 8 (no more than at
// 4); Ollama 1.18×, 1.23×, 1.31× (docs/runtimes.md). A card gains several
// times that, so on one the estimate is long, never short.
func SlotSpeedup(n int) float64 {
	switch {
	case n <= 1:
		return 1
	case n == 2:
		return 1.1
	default:
		return 1.2
	}
}

// WriteTable prints the per-arm price, the total and the caps.
func (e *Estimate) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "arm\tspeed from\ttrials\tloads\twall time\tenergy\t")
	for _, c := range e.Arms {
		src := c.Source
		if c.AtStopCap {
			src += ", output at stop cap"
		}
		if c.Slots > 1 {
			src += fmt.Sprintf(", %d slots at %.2f× one slot's speed", c.Slots, c.SlotSpeedup)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%.1f Wh\t\n", c.Arm, src, c.Trials, c.Loads, c.WallTime.Round(time.Second), c.EnergyWh)
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%s\t%.1f Wh\t\n", e.Trials, e.Loads, e.WallTime.Round(time.Second), e.EnergyWh)
	fmt.Fprintf(tw, "cap\t\t\t\t%s\t%.1f Wh\t\n", e.CapWallTime, e.CapEnergyWh)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range e.Arms {
		if c.Slots > 1 {
			fmt.Fprintln(w, "slots: an arm's trials of a block go out together, n at a time; the model time of each such stretch is divided by the speed-up n trials in flight buy (1.10× at 2, 1.20× from 3 up: the low end of rig bench slots on a CPU, never measured per machine) and its per-trial overhead by n")
			break
		}
	}
	for _, c := range e.Arms {
		if strings.HasPrefix(c.Arm, FidelityCostPrefix) {
			fmt.Fprintln(w, fidelityNote)
			break
		}
	}
	e.Stopping.write(w)
	_, err := fmt.Fprintln(w, "dry run: nothing was executed")
	return err
}

// ParseSpeedTable reads a speed table file: a JSON object from arm name to
// Speed, every entry saying its source. Unknown fields are errors.
func ParseSpeedTable(file string, data []byte) (SpeedTable, error) {
	const want = `(want {"ARM": {"gen_tokens_per_sec": 12.5, "prompt_tokens_per_sec": 150, …, "source": "pilot"}})`
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: %s %s", file, jsonerr.Message(err), want)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", file)
	}
	t := SpeedTable{}
	// Each arm is decoded on its own so an error can name the arm: the
	// decoder's own text names neither it nor the user's keys.
	for _, arm := range sortedKeys(raw) {
		ad := json.NewDecoder(bytes.NewReader(raw[arm]))
		ad.DisallowUnknownFields()
		var s Speed
		if err := ad.Decode(&s); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return nil, fmt.Errorf("%s: %s.%s: a JSON %s where a %s belongs %s", file, arm, te.Field, te.Value, speedKind(te.Type.Kind()), want)
			}
			return nil, fmt.Errorf("%s: %s: %w %s", file, arm, err, want)
		}
		if s.Source != SourcePilot && s.Source != SourceMeasured {
			return nil, fmt.Errorf("%s: %s.source: %q: say %q or %q", file, arm, s.Source, SourcePilot, SourceMeasured)
		}
		if key, problem := s.check(); key != "" {
			return nil, fmt.Errorf("%s: %s.%s: %s", file, arm, key, problem)
		}
		t[arm] = s
	}
	return t, nil
}

func speedKind(k reflect.Kind) string {
	switch k {
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return k.String()
}

// judges reports whether the arm grades some job kind of the design.
func judges(d *Design, arm string) bool {
	for _, jk := range d.JobKinds {
		if jk.Grader.Name == JudgeGrader && jk.Judge == arm {
			return true
		}
	}
	return false
}

// judgeAnswerTokens is what a judge writes per blinded output: one short
// JSON line with its label and score.
const judgeAnswerTokens = 24

// priceJudges adds each judge's calls: one per task and repeat of the job
// kind it grades, whose prompt holds every arm's output, after one load.
func priceJudges(d *Design, p *Plan, speeds SpeedTable, prompt func(TrialKey) int, costs map[string]*ArmCost, order *[]string) {
	for _, jk := range d.JobKinds {
		if jk.Grader.Name != JudgeGrader || jk.Judge == "" {
			continue
		}
		s, ok := speeds[jk.Judge]
		if !ok {
			continue
		}
		groups := map[[2]string]int{} // task|repeat → outputs shown
		for _, t := range p.Trials {
			if t.Key.JobKind == jk.Name {
				groups[[2]string{t.Key.Task, fmt.Sprint(t.Key.Repeat)}]++
			}
		}
		if len(groups) == 0 {
			continue
		}
		c, ok := costs[jk.Judge]
		if !ok {
			c = &ArmCost{Arm: jk.Judge, Source: s.Source}
			costs[jk.Judge] = c
			*order = append(*order, jk.Judge)
		}
		secs := s.LoadSeconds
		c.Loads++
		for g, shown := range groups {
			in := DefaultPromptTokens
			if prompt != nil {
				rep, _ := strconv.Atoi(g[1])
				in = prompt(TrialKey{JobKind: jk.Name, Task: g[0], Repeat: rep})
			}
			out := float64(shown * judgeAnswerTokens)
			// The judge reads the task and every output; each output is
			// priced at the stop cap of the arms it judges.
			in += shown * d.pinnedStopCap(jk.Name)
			secs += float64(in)/s.PromptTokensPerSec + out/s.GenTokensPerSec + s.OverheadSeconds
			c.Trials++
		}
		c.WallTime += time.Duration(secs * float64(time.Second))
		c.EnergyWh += secs * s.Watts / 3600
	}
}

// pinnedStopCap is the largest stop cap among the arms that run a job kind.
func (d *Design) pinnedStopCap(jobKind string) int {
	most := 0
	for _, i := range d.ArmsFor(jobKind) {
		most = max(most, d.Arms[i].Pins.StopCap)
	}
	return most
}
