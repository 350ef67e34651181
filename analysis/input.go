package analysis

import (
	"fmt"
	"math"
	"sort"
)

// Measure is how a job kind's ranking measure is read from a trial.
type Measure string

const (
	// MeasurePass ranks on pass/fail: a task's value is the fraction of its
	// repeats that passed; pairs are tested with the exact McNemar test.
	MeasurePass Measure = "pass"
	// MeasureScore ranks on a score in [0,1]; pairs are tested with the exact
	// sign-flip permutation test on per-task differences.
	MeasureScore Measure = "score"
)

// IntervalMethod names how an interval was made. A design chooses the
// bootstrap (Percentile or BCa) for score job kinds; pass job kinds use the
// score intervals for proportions, and a sample with no spread gets an exact
// bound whatever was chosen. Every Interval carries the method it used.
type IntervalMethod string

const (
	// Percentile and BCa are task-clustered bootstrap intervals.
	Percentile IntervalMethod = "percentile"
	BCa        IntervalMethod = "bca"
	// WilsonBlaker is Wilson's score interval for a pass rate with one
	// repeat, joined with Blaker's exact interval at the coverage floor
	// (93.5% for a 95% interval), so its coverage holds the floor at every
	// true rate.
	WilsonBlaker IntervalMethod = "wilson-blaker"
	// WilsonBlakerDesignEffect is the same at the effective number of
	// tasks, for a pass rate over several repeats.
	WilsonBlakerDesignEffect IntervalMethod = "wilson-blaker-design-effect"
	// TangoEdges is Tango's score interval for a difference of paired pass
	// rates, widened on the edges of the table (a nearly empty cell) to
	// keep the coverage floor.
	TangoEdges IntervalMethod = "tango-edges"
	// TangoEdgesDesignEffect is the same at the effective number of tasks,
	// for paired pass rates over several repeats.
	TangoEdgesDesignEffect IntervalMethod = "tango-edges-design-effect"
	// NoSpread is the exact bound for a sample whose tasks are all equal,
	// where an interval built from the spread would have zero width.
	NoSpread IntervalMethod = "exact-no-spread"
)

// Describe names the method in words, for a report beside its interval.
func (m IntervalMethod) Describe() string {
	switch m {
	case Percentile:
		return "bootstrap percentile over tasks"
	case BCa:
		return "bootstrap BCa over tasks"
	case WilsonBlaker:
		return "Wilson score interval joined with Blaker's exact interval at the coverage floor"
	case WilsonBlakerDesignEffect:
		return "Wilson score interval joined with Blaker's exact interval at the coverage floor, at the effective task count (design effect of repeats)"
	case TangoEdges:
		return "Tango score interval for paired proportions, widened on the table's edges to the coverage floor"
	case TangoEdgesDesignEffect:
		return "Tango score interval for paired proportions, widened on the table's edges to the coverage floor, at the effective task count (design effect of repeats)"
	case NoSpread:
		return "exact bound: every task scored the same, so no interval from the spread exists"
	case ConfidenceSeq:
		return "confidence sequence (empirical Bernstein), valid at any stopping time"
	case StagewiseExact:
		return "exact interval of the group-sequential sign test by its stagewise ordering, given the discordant tasks"
	}
	return string(m)
}

// CostMeasure names the cost a tradeoff is judged on.
type CostMeasure string

const (
	CostWall   CostMeasure = "wall"
	CostMemory CostMeasure = "memory"
	CostEnergy CostMeasure = "energy"
)

// Arm is one declared arm; JudgeID and CalibrationID decide comparability.
type Arm struct {
	Name          string `json:"name"`
	JudgeID       string `json:"judge_id,omitempty"`
	CalibrationID string `json:"calibration_id,omitempty"`
}

// JobKind is one job kind with its pre-registered ranking measure. Gate is the
// per-task pass threshold on the averaged value (pass rate, threshold sweep).
type JobKind struct {
	Name    string  `json:"name"`
	Measure Measure `json:"measure"`
	Gate    float64 `json:"gate"`
	// RankBy is MetricFidelityKL when the job kind's pairs are judged on
	// their paired difference in mean KL per token from the reference arm
	// (Input.Fidelity; lower is better) instead of on Measure, which still
	// gives the arms' pass rates beside. Empty ranks by Measure; omitted
	// from the JSON then, so the comparison hash of a design that does not
	// rank by fidelity is the one it had before fidelity could rank.
	RankBy string `json:"rank_by,omitempty"`
}

// Pair is a comparison named in the design before any run.
type Pair struct {
	Candidate string `json:"candidate"`
	Baseline  string `json:"baseline"`
}

func (p Pair) String() string { return p.Candidate + " vs " + p.Baseline }

// Design is the part of a frozen design the analysis reads.
type Design struct {
	Hash     string    `json:"hash"`
	Arms     []Arm     `json:"arms"`
	JobKinds []JobKind `json:"job_kinds"`
	Pairs    []Pair    `json:"pairs"`
	// Incumbent is the current baseline; the rule's "keep the incumbent" keeps it.
	Incumbent string  `json:"incumbent"`
	Alpha     float64 `json:"alpha"`      // family-wise, Holm across job kinds × pairs
	PBestBar  float64 `json:"p_best_bar"` // a leader below this P(best) is a tie
	Resamples int     `json:"resamples"`
	// PermutationResamples is used when a sign-flip test is too large to
	// enumerate exactly.
	PermutationResamples int            `json:"permutation_resamples"`
	Seed                 uint64         `json:"seed"`
	Interval             IntervalMethod `json:"interval"`
	Level                float64        `json:"level"` // interval level, e.g. 0.95
	CostMeasure          CostMeasure    `json:"cost_measure"`
	// CostFactor is how much worse (ratio) a cost may be before a better score
	// becomes a tradeoff, e.g. 1.5.
	CostFactor float64 `json:"cost_factor"`
	// Power is the design's stated pre-run sizing, if any.
	Power *PowerPlan `json:"power,omitempty"`
	Rule  Rule       `json:"rule"`
	// Guardrails and Policy may block a winner the rule accepts, never make
	// one; every pair is checked against them (Report.Checks).
	Guardrails []Guardrail   `json:"guardrails,omitempty"`
	Policy     *WinnerPolicy `json:"winner_policy,omitempty"`
}

// PowerPlan is the sizing stated in a design: a pilot's discordance and the
// planned task count.
type PowerPlan struct {
	PilotDiscordance float64 `json:"pilot_discordance"`
	Tasks            int     `json:"tasks"`
	Power            float64 `json:"power"` // default 0.8
	// SmallestDifference is the lead the study was sized to detect; the
	// "underpowered" check compares it with what the paired tasks detect.
	SmallestDifference float64 `json:"smallest_difference,omitempty"`
}

// EnergySource labels where an energy figure came from.
type EnergySource string

const (
	EnergyNVML     EnergySource = "nvml"
	EnergyRAPL     EnergySource = "rapl"
	EnergyEstimate EnergySource = "estimate"
)

// Trial is one arm × job kind × task × repeat result, as read from a receipt.
type Trial struct {
	DesignHash string  `json:"design_hash"`
	Arm        string  `json:"arm"`
	JobKind    string  `json:"job_kind"`
	Task       string  `json:"task"`
	Repeat     int     `json:"repeat"`
	Score      float64 `json:"score"` // in [0,1]; read for MeasureScore
	Pass       bool    `json:"pass"`  // read for MeasurePass
	// Preempted trials were stopped by the governor or host: never scored.
	Preempted bool `json:"preempted,omitempty"`
	// BudgetBlown trials exceeded their time or memory budget: a failure at
	// this card size.
	BudgetBlown bool `json:"budget_blown,omitempty"`
	// Capped trials hit a cap (the stop cap, or a harness's turn, token or time
	// cap); they are scored as graded and counted apart.
	Capped bool `json:"capped,omitempty"`
	// Truncated trials stopped at the stop cap: the generation hit its token
	// limit. They are capped trials like any other (scored as graded, counted
	// in Counts.Capped) and also get a warning naming StopCap, the arm's
	// stop_cap pin, because a cap that is too small censors every arm it cuts.
	Truncated bool `json:"truncated,omitempty"`
	StopCap   int  `json:"stop_cap,omitempty"`
	// RepeatsPrompt marks an output that repeats its task's prompt instead
	// of answering it (the reader of the receipts compares the kept text
	// with the prompt). It only shapes the stop-cap warning: a larger cap
	// would lengthen such an output, not finish an answer. The comparison
	// hash ignores it.
	RepeatsPrompt bool `json:"repeats_prompt,omitempty"`
	// Missing marks a planned trial with no result: a warning, never a zero.
	Missing bool `json:"missing,omitempty"`
	// Reason says why a missing trial has no result, e.g. the runtime's
	// error; the report shows it, the comparison hash ignores it.
	Reason string `json:"reason,omitempty"`

	WallSeconds     float64      `json:"wall_seconds"`
	PeakMemoryBytes int64        `json:"peak_memory_bytes"`
	EnergyJoules    float64      `json:"energy_joules"`
	EnergySource    EnergySource `json:"energy_source,omitempty"`
	// PromptTokS, GenTokS, TTFTMS and TPOTMS are the runtime's own timings
	// of the trial (its receipt); zero when not timed. Only the speed card
	// reads them; the comparison hash leaves them out.
	PromptTokS float64 `json:"prompt_tok_s,omitempty"`
	GenTokS    float64 `json:"gen_tok_s,omitempty"`
	TTFTMS     float64 `json:"ttft_ms,omitempty"`
	TPOTMS     float64 `json:"tpot_ms,omitempty"`
	// Slots is the arm's pins.slots on the receipt (0 read as 1). StartMS
	// (Unix milliseconds) and WallSeconds place the trial's own request in
	// time, and Tokens (prompt + output) and OutputTokens are what the
	// runtime processed for it: the cost of trials that shared a runtime is
	// apportioned from them (load.go). The comparison hash leaves them out.
	Slots        int   `json:"slots,omitempty"`
	StartMS      int64 `json:"start_ms,omitempty"`
	Tokens       int   `json:"tokens,omitempty"`
	OutputTokens int   `json:"output_tokens,omitempty"`
	// Metrics are the receipt fields a guardrail names ("receipt.FIELD"),
	// by field.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// Input is everything one analysis reads.
type Input struct {
	Design Design  `json:"design"`
	Trials []Trial `json:"trials"`
	// Sequential is the execution's early-stopping record when its design
	// has a stopping rule: monitored pairs then take their p-values and
	// intervals from it.
	Sequential *Sequential `json:"sequential,omitempty"`
	// Fidelity is, per job kind and named pair, the paired difference in
	// mean KL per token from the job kind's reference arm, which a
	// fidelity_kl guardrail reads; nil when the study kept no fidelity
	// records.
	Fidelity []FidelityKL `json:"fidelity,omitempty"`
}

// withDefaults fills unset analysis parameters with the documented defaults.
func (d Design) withDefaults() Design {
	if d.Alpha == 0 {
		d.Alpha = 0.05
	}
	if d.PBestBar == 0 {
		d.PBestBar = 0.9
	}
	if d.Resamples == 0 {
		d.Resamples = 10000
	}
	if d.PermutationResamples == 0 {
		d.PermutationResamples = 20000
	}
	if d.Interval == "" {
		d.Interval = BCa
	}
	if d.Level == 0 {
		d.Level = 0.95
	}
	if d.CostMeasure == "" {
		d.CostMeasure = CostWall
	}
	if d.CostFactor == 0 {
		d.CostFactor = 1.5
	}
	for i := range d.JobKinds {
		if d.JobKinds[i].Gate == 0 {
			d.JobKinds[i].Gate = 0.5
		}
	}
	if d.Power != nil && d.Power.Power == 0 {
		p := *d.Power
		p.Power = 0.8
		d.Power = &p
	}
	return d
}

// MinResamples is the fewest bootstrap resamples an analysis accepts.
const MinResamples = 10000

// Validate checks the design and the trials against each other.
func (in Input) Validate() error {
	d := in.Design.withDefaults()
	if d.Hash == "" {
		return &FieldError{Field: "design.hash", Problem: "empty", Fix: "analyse a frozen design"}
	}
	arms, names, err := validateArms(d)
	if err != nil {
		return err
	}
	kinds, err := validateJobKinds(d)
	if err != nil {
		return err
	}
	if d.Incumbent != "" && !arms[d.Incumbent] {
		return &UnknownArmError{Field: "design.incumbent", Arm: d.Incumbent, Known: names}
	}
	if err := validatePairs(d, arms, names); err != nil {
		return err
	}
	if err := validateSettings(d); err != nil {
		return err
	}
	if err := d.Rule.validate(d, names); err != nil {
		return err
	}
	for i, g := range d.Guardrails {
		if err := g.validate(fmt.Sprintf("design.guardrails[%d]", i)); err != nil {
			return err
		}
	}
	return validateTrials(d, in.Trials, arms, kinds, names)
}

// validateArms checks that every arm is named once, and returns the
// declared arms as a set and in order.
func validateArms(d Design) (map[string]bool, []string, error) {
	arms := map[string]bool{}
	var names []string
	for i, a := range d.Arms {
		if a.Name == "" {
			return nil, nil, &FieldError{Field: fmt.Sprintf("design.arms[%d].name", i), Problem: "empty", Fix: "name every arm"}
		}
		if arms[a.Name] {
			return nil, nil, &FieldError{Field: fmt.Sprintf("design.arms[%d].name", i), Problem: fmt.Sprintf("%q declared twice", a.Name), Fix: "arm names are unique"}
		}
		arms[a.Name] = true
		names = append(names, a.Name)
	}
	if len(arms) == 0 {
		return nil, nil, &FieldError{Field: "design.arms", Problem: "no arms", Fix: "declare at least one arm"}
	}
	return arms, names, nil
}

// validateJobKinds checks each job kind's name, measure and gate, and
// returns the declared kinds.
func validateJobKinds(d Design) (map[string]bool, error) {
	kinds := map[string]bool{}
	for i, k := range d.JobKinds {
		f := fmt.Sprintf("design.job_kinds[%d]", i)
		if k.Name == "" || kinds[k.Name] {
			return nil, &FieldError{Field: f + ".name", Problem: fmt.Sprintf("%q is empty or repeated", k.Name), Fix: "job kind names are unique"}
		}
		if k.Measure != MeasurePass && k.Measure != MeasureScore {
			return nil, &FieldError{Field: f + ".measure", Problem: fmt.Sprintf("%q is not a measure", k.Measure), Fix: `use "pass" or "score"`}
		}
		if k.RankBy != "" && k.RankBy != MetricFidelityKL {
			return nil, &FieldError{Field: f + ".rank_by", Problem: fmt.Sprintf("%q is not a ranking measure the analysis reads besides the trials", k.RankBy), Fix: `use "fidelity_kl" or leave it empty to rank by the measure`}
		}
		if k.Gate < 0 || k.Gate > 1 {
			return nil, &FieldError{Field: f + ".gate", Problem: fmt.Sprintf("%v is outside [0,1]", k.Gate), Fix: "the gate is a per-task threshold in [0,1]"}
		}
		kinds[k.Name] = true
	}
	if len(kinds) == 0 {
		return nil, &FieldError{Field: "design.job_kinds", Problem: "no job kinds", Fix: "declare each job kind with its ranking measure"}
	}
	return kinds, nil
}

// validatePairs checks that each pair names two declared arms, differs
// and is named once.
func validatePairs(d Design, arms map[string]bool, names []string) error {
	seen := map[Pair]bool{}
	for i, p := range d.Pairs {
		if !arms[p.Candidate] {
			return &UnknownArmError{Field: fmt.Sprintf("design.pairs[%d].candidate", i), Arm: p.Candidate, Known: names}
		}
		if !arms[p.Baseline] {
			return &UnknownArmError{Field: fmt.Sprintf("design.pairs[%d].baseline", i), Arm: p.Baseline, Known: names}
		}
		if p.Candidate == p.Baseline || seen[p] {
			return &FieldError{Field: fmt.Sprintf("design.pairs[%d]", i), Problem: fmt.Sprintf("%s is repeated or compares an arm with itself", p), Fix: "name each pair once"}
		}
		seen[p] = true
	}
	return nil
}

// validateSettings checks the design's statistical settings: levels,
// resample counts, the power plan, the interval method and the cost.
func validateSettings(d Design) error {
	if d.Alpha <= 0 || d.Alpha >= 1 {
		return &FieldError{Field: "design.alpha", Problem: fmt.Sprintf("%v is outside (0,1)", d.Alpha), Fix: "a family-wise alpha such as 0.05"}
	}
	if d.PBestBar <= 0 || d.PBestBar > 1 {
		return &FieldError{Field: "design.p_best_bar", Problem: fmt.Sprintf("%v is outside (0,1]", d.PBestBar), Fix: "e.g. 0.9"}
	}
	if d.Resamples < MinResamples {
		return &FieldError{Field: "design.resamples", Problem: fmt.Sprintf("%d is below %d", d.Resamples, MinResamples), Fix: "intervals and P(best) need at least 10,000 resamples"}
	}
	if d.PermutationResamples < 1000 {
		return &FieldError{Field: "design.permutation_resamples", Problem: fmt.Sprintf("%d is below 1000", d.PermutationResamples), Fix: "leave it unset for 20,000"}
	}
	if pw := d.Power; pw != nil {
		switch {
		case pw.Tasks < 1 || pw.Tasks > MaxTasks:
			return &FieldError{Field: "design.power.tasks", Problem: fmt.Sprintf("%d is outside [1, %d]", pw.Tasks, MaxTasks), Fix: "the planned task count"}
		case !(pw.PilotDiscordance > 0 && pw.PilotDiscordance <= 1):
			return &FieldError{Field: "design.power.pilot_discordance", Problem: fmt.Sprintf("%v is outside (0,1]", pw.PilotDiscordance), Fix: "the pilot's share of tasks where the pair's pass/fail differs"}
		case !(pw.Power > 0 && pw.Power < 1):
			return &FieldError{Field: "design.power.power", Problem: fmt.Sprintf("%v is outside (0,1)", pw.Power), Fix: "e.g. 0.8"}
		}
	}
	if d.Interval != Percentile && d.Interval != BCa {
		return &FieldError{Field: "design.interval", Problem: fmt.Sprintf("%q is not a method", d.Interval), Fix: `use "percentile" or "bca"`}
	}
	if d.Level <= 0 || d.Level >= 1 {
		return &FieldError{Field: "design.level", Problem: fmt.Sprintf("%v is outside (0,1)", d.Level), Fix: "e.g. 0.95"}
	}
	if d.CostMeasure != CostWall && d.CostMeasure != CostMemory && d.CostMeasure != CostEnergy {
		return &FieldError{Field: "design.cost_measure", Problem: fmt.Sprintf("%q is not a cost", d.CostMeasure), Fix: `use "wall", "memory" or "energy"`}
	}
	if d.CostFactor < 1 {
		return &FieldError{Field: "design.cost_factor", Problem: fmt.Sprintf("%v is below 1", d.CostFactor), Fix: "a ratio such as 1.5"}
	}
	return nil
}

// validateTrials checks each of this design's trials against the design,
// refuses a second scored result for one trial, and then refuses trials
// from other designs.
func validateTrials(d Design, trials []Trial, arms, kinds map[string]bool, names []string) error {
	others := map[string]int{}
	type key struct {
		arm, kind, task string
		repeat          int
	}
	scored := map[key]int{}
	for i, t := range trials {
		if t.DesignHash != d.Hash {
			others[t.DesignHash]++
			continue
		}
		f := fmt.Sprintf("trials[%d]", i)
		if !arms[t.Arm] {
			return &UnknownArmError{Field: f + ".arm", Arm: t.Arm, Known: names}
		}
		if !kinds[t.JobKind] {
			return &FieldError{Field: f + ".job_kind", Problem: fmt.Sprintf("%q is not declared", t.JobKind), Fix: "declare it in design.job_kinds"}
		}
		if t.Task == "" {
			return &FieldError{Field: f + ".task", Problem: "empty", Fix: "every trial names its task"}
		}
		if !t.Missing && !t.Preempted && (math.IsNaN(t.Score) || t.Score < 0 || t.Score > 1) {
			return &FieldError{Field: f + ".score", Problem: fmt.Sprintf("%v is outside [0,1]", t.Score), Fix: "scores are normalised to [0,1]"}
		}
		if !t.Missing && !t.Preempted {
			k := key{t.Arm, t.JobKind, t.Task, t.Repeat}
			if j, dup := scored[k]; dup {
				return &FieldError{Field: f, Problem: fmt.Sprintf("a second scored result for arm %s, job kind %s, task %s, repeat %d (first at trials[%d])", t.Arm, t.JobKind, t.Task, t.Repeat, j),
					Fix: "pass one scored attempt per trial; only preempted attempts are rerun"}
			}
			scored[k] = i
		}
	}
	if len(others) > 0 {
		return &MixedDesignError{Want: d.Hash, Others: others}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
