package report

import (
	"fmt"
	"time"
)

// CardCaveat is printed beside every card table, because a memory
// reservation reproduces what fits and nothing else about a smaller card.
const CardCaveat = "A simulated card reproduces what fits, not a smaller card's bandwidth, compute or spill behaviour."

// Data is everything a report shows. It is a plain view model: the analysis
// and the decision are mapped into it by the caller, and every renderer
// reads only this.
type Data struct {
	Study          string    `json:"study"`
	Sentences      Sentences `json:"sentences"`
	DesignHash     string    `json:"design_hash"`
	ComparisonHash string    `json:"comparison_hash"`
	GeneratedAt    time.Time `json:"generated_at"`
	// AnalysisSeed seeded every resample of the analysis (bootstrap
	// intervals, P(best), permutation tests); AnalysisSeedFrom says how it
	// was drawn from the design, e.g. "the first 8 bytes of the design hash".
	AnalysisSeed     uint64 `json:"analysis_seed"`
	AnalysisSeedFrom string `json:"analysis_seed_from,omitempty"`
	// Machine is the one machine line the main runs used: GPU, driver,
	// runtimes and their versions.
	Machine  string    `json:"machine"`
	Licences []Licence `json:"licences"`
	Kinds    []Kind    `json:"kinds"`
	Cards    *Cards    `json:"cards,omitempty"`
	Replay   *Replay   `json:"replay,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
	// Stop is the design's stopping rule at work; nil without one.
	Stop *Stop `json:"stop,omitempty"`
}

// Sentences are the three sentences written before anything else.
type Sentences struct {
	// JobKinds names the job kinds and the decision each one feeds.
	JobKinds string `json:"job_kinds"`
	// Candidates names the candidates and the incumbent, with how each runs.
	Candidates string `json:"candidates"`
	// Measure says why the ranking measure answers the decision.
	Measure string `json:"measure"`
}

// Licence is one checked item of the licence gate.
type Licence struct {
	Item    string `json:"item"`
	Entry   string `json:"entry"`
	Use     string `json:"use"`
	Verdict string `json:"verdict"`
}

// Line is the licence as the report prints it: "item (entry, use: verdict)".
func (l Licence) Line() string {
	return fmt.Sprintf("%s (%s, %s: %s)", l.Item, l.Entry, l.Use, l.Verdict)
}

// Kind is one job kind: its ranking, its named pairs and what goes with them.
type Kind struct {
	Name string `json:"name"`
	// Measure is the pre-registered ranking measure, e.g. "pass rate".
	Measure string `json:"measure"`
	// Direction is "higher" or "lower": which way the measure is better.
	Direction string `json:"direction"`
	// RankedBy words what ranks the job kind's pairs when the design ranks
	// by fidelity: mean KL per token to the reference, lower is better.
	// Measure and Direction then describe the arms' pass rates, shown
	// beside; empty when the measure ranks.
	RankedBy string `json:"ranked_by,omitempty"`
	// Interval says in words how this job kind's intervals were made, one
	// phrase per method its arms and pairs used, e.g. "95%; wilson-blaker:
	// Wilson score interval joined with Blaker's exact interval at the
	// coverage floor; tango-edges: Tango score interval for paired
	// proportions, widened on the table's edges to the coverage floor".
	Interval string `json:"interval"`
	// Verdict is the ranking's verdict: "best", "tie", "no signal" (every
	// arm scored one and the same value on every task: nothing was
	// measured) or "no common tasks". Leader is the arm that ranks first,
	// empty when no arm does (no signal, or a top shared exactly). Empty
	// Verdict (data from before these fields) leaves the report to read the
	// leader off P(best).
	Verdict string `json:"verdict,omitempty"`
	Leader  string `json:"leader,omitempty"`
	// Gate is the design's pass threshold on the measure.
	Gate float64 `json:"gate"`
	// BestBar is the design's P(best) bar: a leader below it is a tie.
	BestBar float64 `json:"best_bar"`
	// Alpha is the family-wise level the Holm-adjusted p-values are read at.
	Alpha float64 `json:"alpha"`
	// Detectable is the smallest difference the design says the task count
	// can detect at 80% power; nil when the design states none.
	Detectable *float64 `json:"detectable,omitempty"`
	// DetectableComputed is what rig computes the planned task count
	// (DetectableTasks) detects with the design's power (DetectablePower)
	// from its pilot discordance, at Holm's strictest step; nil when the
	// design gives no pilot. The two are shown side by side and labelled,
	// because they differ (a stated 0.40 is 0.403 for 27 tasks).
	DetectableComputed *float64 `json:"detectable_computed,omitempty"`
	DetectableTasks    int      `json:"detectable_tasks,omitempty"`
	DetectablePower    float64  `json:"detectable_power,omitempty"`
	// DetectablePilot is the pilot discordance rig computed from; 0 when
	// the design gives none. With a pilot and DetectableComputed nil, the
	// planned tasks cannot detect any lead at that power.
	DetectablePilot float64 `json:"detectable_pilot,omitempty"`

	Arms     []Arm       `json:"arms"`
	Pairs    []Pair      `json:"pairs"`
	Sweep    *Sweep      `json:"sweep,omitempty"`
	Paired   []PairedRow `json:"paired,omitempty"`
	Failures []Failure   `json:"failures,omitempty"`
	Cost     *CostFigure `json:"cost,omitempty"`
	// Scores are the per-task values the analysis used; Rows the paired
	// matrix, one row per named pair and task. Both are read by the page's
	// gate slider and rows matrix.
	Scores *Scores `json:"scores,omitempty"`
	Rows   []Row   `json:"rows,omitempty"`
	// NoOutput lists, per arm, the tasks with no counted result (every
	// trial errored, was preempted or never ran): what a reader must rerun.
	NoOutput []NoOutput `json:"no_output,omitempty"`
	// Excluded are the tasks the design left out of this job kind, each
	// with the reason written there (design.exclude_tasks): never run, and
	// shown so that nothing is left out silently.
	Excluded []Excluded `json:"excluded,omitempty"`
	// NearDuplicates are the bank's pairs of tasks alike at or above the
	// lint's threshold (NearMethod says how alike): kept and counted, and
	// listed so that a reader can judge whether two count as one.
	NearDuplicates []NearDuplicate `json:"near_duplicates,omitempty"`
	NearMethod     string          `json:"near_method,omitempty"`
	// Latency is each arm's p50 and p95 wall time per trial with its
	// difference from the baseline's, in the order of Arms.
	Latency []Latency `json:"latency,omitempty"`
	// Speed is each arm's speed card, in the order of Arms.
	Speed []Speed `json:"speed,omitempty"`
	// SRM is the sample-ratio check, shown with the failures: did each arm
	// end with the share of scored trials the plan gave it?
	SRM *SRM `json:"srm,omitempty"`
	// Fidelity is each arm's fidelity to the job kind's reference arm; nil
	// when the study kept no fidelity records for it.
	Fidelity *Fidelity `json:"fidelity,omitempty"`
}

// Latency is one arm's wall time per scored trial; nil is not measured.
type Latency struct {
	Arm        string   `json:"arm"`
	Trials     int      `json:"trials"`
	P50MS      *float64 `json:"p50_ms,omitempty"`
	P95MS      *float64 `json:"p95_ms,omitempty"`
	DeltaP50MS *float64 `json:"delta_p50_ms,omitempty"`
	DeltaP95MS *float64 `json:"delta_p95_ms,omitempty"`
}

// Speed is one arm's speed card: the runtime's own timings over its scored
// trials beside wall time, peak memory and energy. nil is not measured.
type Speed struct {
	Arm      string `json:"arm"`
	Runtime  string `json:"runtime"`
	Baseline bool   `json:"baseline,omitempty"`
	Timed    int    `json:"timed"` // scored trials the runtime timed
	// PromptTokS and GenTokS are medians of the per-trial rates.
	PromptTokS   *float64 `json:"prompt_tok_s,omitempty"`
	GenTokS      *float64 `json:"gen_tok_s,omitempty"`
	TTFTP50MS    *float64 `json:"ttft_p50_ms,omitempty"`
	TTFTP99MS    *float64 `json:"ttft_p99_ms,omitempty"`
	TPOTP50MS    *float64 `json:"tpot_p50_ms,omitempty"`
	TPOTP99MS    *float64 `json:"tpot_p99_ms,omitempty"`
	WallSeconds  *float64 `json:"wall_seconds,omitempty"`
	PeakMemBytes *int64   `json:"peak_mem_bytes,omitempty"`
	EnergyJoules *float64 `json:"energy_joules,omitempty"`
	EnergySource string   `json:"energy_source,omitempty"`
	// Slots is the arm's pins.slots; TrialsPerS and OutputTokS its
	// throughput over the time its runtime served it (every slot
	// together); WallP50Seconds the median of its trials' own request
	// wall times, the latency under that load. LoadNote says how trials
	// that shared the runtime were charged; empty when none did.
	Slots          int      `json:"slots,omitempty"`
	TrialsPerS     *float64 `json:"trials_per_s,omitempty"`
	OutputTokS     *float64 `json:"output_tok_s,omitempty"`
	WallP50Seconds *float64 `json:"wall_p50_seconds,omitempty"`
	LoadNote       string   `json:"load_note,omitempty"`
	// Delta is each figure's relative change against the baseline arm's
	// (+0.25 = 25% more); nil for the baseline itself.
	Delta *SpeedDelta `json:"delta_vs_baseline,omitempty"`
}

// SpeedDelta holds a Speed's relative changes; nil where either side is
// unmeasured.
type SpeedDelta struct {
	PromptTokS *float64 `json:"prompt_tok_s,omitempty"`
	GenTokS    *float64 `json:"gen_tok_s,omitempty"`
	TTFTP50    *float64 `json:"ttft_p50,omitempty"`
	TTFTP99    *float64 `json:"ttft_p99,omitempty"`
	TPOTP50    *float64 `json:"tpot_p50,omitempty"`
	TPOTP99    *float64 `json:"tpot_p99,omitempty"`
	Wall       *float64 `json:"wall_seconds,omitempty"`
	OutputTokS *float64 `json:"output_tok_s,omitempty"`
	PeakMem    *float64 `json:"peak_mem,omitempty"`
	Energy     *float64 `json:"energy,omitempty"`
}

// SRM is a job kind's chi-square goodness-of-fit test of the scored trials
// per arm against the planned shares.
type SRM struct {
	Arms     []string `json:"arms"`
	Planned  []int    `json:"planned"`
	Scored   []int    `json:"scored"`
	ChiSq    *float64 `json:"chi_sq,omitempty"`
	DF       int      `json:"df"`
	P        *float64 `json:"p,omitempty"`
	Alpha    float64  `json:"alpha"`
	Mismatch bool     `json:"mismatch"`
}

// NearDuplicate is one pair of near-duplicate tasks of a bank.
type NearDuplicate struct {
	A          string  `json:"a"`
	B          string  `json:"b"`
	Similarity float64 `json:"similarity"`
}

// Excluded is one task the design left out, and why.
type Excluded struct {
	Task string `json:"task"`
	Why  string `json:"why"`
}

// NoOutput is one arm's tasks that never produced a counted result.
type NoOutput struct {
	Arm   string   `json:"arm"`
	Tasks []string `json:"tasks"`
}

// Interval is an estimate with its interval and the method that made it.
type Interval struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	// Method names how the interval was made, printed beside it:
	// "wilson-blaker", "wilson-blaker-design-effect", "tango-edges",
	// "tango-edges-design-effect", "bca", "percentile" or
	// "exact-no-spread" (the sequential ones besides). Kind.Interval says
	// each in words.
	Method string `json:"method,omitempty"`
	// Note says why a fallback was taken (e.g. every task scored the same).
	Note string `json:"note,omitempty"`
}

// Arm is one row of a job kind's ranking table.
type Arm struct {
	Arm      string `json:"arm"`
	Runtime  string `json:"runtime"`
	Digest   string `json:"digest"`
	Baseline bool   `json:"baseline,omitempty"`

	Score    Interval `json:"score"`
	PassRate float64  `json:"pass_rate"`
	Median   float64  `json:"median"`
	P10      float64  `json:"p10"`
	Worst    float64  `json:"worst"`
	PBest    float64  `json:"p_best"`
	// Tie marks the leader whose P(best) is below the design's bar.
	Tie bool `json:"tie,omitempty"`

	Tasks     int `json:"tasks"`
	Trials    int `json:"trials"`
	Preempted int `json:"preempted"`
	Capped    int `json:"capped"`

	// Cost at the card size the decision is for; nil means not measured,
	// which the report shows as missing, never as zero.
	WallSeconds  *float64 `json:"wall_seconds,omitempty"`
	PeakMemBytes *int64   `json:"peak_mem_bytes,omitempty"`
	EnergyJoules *float64 `json:"energy_joules,omitempty"`
	// EnergySource is "NVML", "RAPL" or "estimate".
	EnergySource string `json:"energy_source,omitempty"`
}

// Pair is one pairwise test named in the design.
type Pair struct {
	Challenger string   `json:"challenger"`
	Baseline   string   `json:"baseline"`
	Delta      Interval `json:"delta"`
	PRaw       float64  `json:"p_raw"`
	PHolm      float64  `json:"p_holm"`
	// Test names the test, e.g. "exact McNemar (binomial on 17 discordant tasks)".
	Test string `json:"test"`
	// Outcome is one of improvement, regression, tradeoff, tie,
	// inconclusive, not_comparable.
	Outcome string `json:"outcome"`
	// NotShown, when set, is printed instead of any reading of the delta,
	// because it is below what the study can detect.
	NotShown string `json:"not_shown,omitempty"`
	// Reading is what every renderer prints as the pair's reading: shown
	// or not at the family-wise level after Holm, or NotShown (the CLI's
	// summary prints the same, analysis.PairResult.Reading).
	Reading string `json:"reading"`
	// Missing counts the job kind's tasks that are not a complete pair;
	// MissingTasks names them with the arm that lacks a result, e.g.
	// "t07 (lacks gemma)". A missing pair is never a zero.
	Missing      int      `json:"missing"`
	MissingTasks []string `json:"missing_tasks,omitempty"`
}

// Sweep is the pass rate of each arm as the gate moves.
type Sweep struct {
	Gates []float64   `json:"gates"`
	Lines []SweepLine `json:"lines"`
}

// SweepLine is one arm's pass rate at each gate of a Sweep.
type SweepLine struct {
	Arm      string    `json:"arm"`
	PassRate []float64 `json:"pass_rate"`
}

// Change is the direction of a paired row.
type Change string

// The two changes a paired row can show.
const (
	NewlyFailing Change = "newly_failing"
	NewlyFixed   Change = "newly_fixed"
)

// PairedRow is a task whose pass/fail flipped between baseline and
// challenger, with both outputs.
type PairedRow struct {
	Task             string  `json:"task"`
	Challenger       string  `json:"challenger"`
	Baseline         string  `json:"baseline"`
	Change           Change  `json:"change"`
	BaselineScore    float64 `json:"baseline_score"`
	ChallengerScore  float64 `json:"challenger_score"`
	BaselineOutput   string  `json:"baseline_output"`
	ChallengerOutput string  `json:"challenger_output"`
}

// Failure counts one failure code for one arm.
type Failure struct {
	Arm   string `json:"arm"`
	Code  string `json:"code"`
	Count int    `json:"count"`
}

// CostFigure is what the cost-against-score figure plots.
type CostFigure struct {
	// Label names the cost axis, e.g. "wall time per task (s)".
	Label  string      `json:"label"`
	Points []CostPoint `json:"points"`
}

// CostPoint is one arm's cost and score.
type CostPoint struct {
	Arm   string  `json:"arm"`
	Cost  float64 `json:"cost"`
	Score float64 `json:"score"`
}

// Cards is the card sub-study: model × profile, where the profile is the
// treatment.
type Cards struct {
	Rows []CardRow `json:"rows"`
}

// CardRow is one model at one card profile.
type CardRow struct {
	Model   string `json:"model"`
	Profile string `json:"profile"`
	JobKind string `json:"job_kind,omitempty"`
	// Simulated is true for a memory reservation, false for a real card.
	Simulated bool `json:"simulated"`
	Fits      bool `json:"fits"`
	// Verdict is the preflight's words, e.g. "fits (1.2 GiB margin)".
	Verdict      string   `json:"verdict"`
	PromptTokS   *float64 `json:"prompt_tok_s,omitempty"`
	GenTokS      *float64 `json:"gen_tok_s,omitempty"`
	Score        *float64 `json:"score,omitempty"`
	ScoreLow     *float64 `json:"score_low,omitempty"`
	ScoreHigh    *float64 `json:"score_high,omitempty"`
	PeakMemBytes *int64   `json:"peak_mem_bytes,omitempty"`
	WallSeconds  *float64 `json:"wall_seconds,omitempty"`
	EnergyJoules *float64 `json:"energy_joules,omitempty"`
	EnergySource string   `json:"energy_source,omitempty"`
	// Fidelity is the cell's mean KL per token from its job kind's
	// reference arm, with its interval; nil where no record scored it.
	Fidelity *Interval `json:"fidelity_kl,omitempty"`
	// FidelityReference marks the cell the others at its profile are held
	// to: its fidelity to itself is not a measurement.
	FidelityReference bool `json:"fidelity_reference,omitempty"`
}

// ReplayStatus is the result of replaying one generation record.
type ReplayStatus string

// The replay results a row can have.
const (
	Reproduced   ReplayStatus = "reproduced"
	Mismatch     ReplayStatus = "mismatch"
	StackDiffers ReplayStatus = "stack_differs"
)

// Replay is the sample of generation records replayed through the pinned
// model and stack.
type Replay struct {
	// Tolerance is the replay check's tolerance in words, e.g.
	// "|Δ log-prob| ≤ 1e-3 per token".
	Tolerance string      `json:"tolerance"`
	Rows      []ReplayRow `json:"rows"`
}

// ReplayRow is one replayed record.
type ReplayRow struct {
	Record string       `json:"record"`
	Arm    string       `json:"arm"`
	Status ReplayStatus `json:"status"`
	// MaxDelta is the largest per-token log-probability difference seen.
	MaxDelta float64 `json:"max_delta"`
	Detail   string  `json:"detail,omitempty"`
}

// Decision is the recorded decision and how the rule reached it.
type Decision struct {
	Rule      string    `json:"rule"`
	Trace     []string  `json:"trace"`
	Outcome   string    `json:"outcome"`
	Actor     string    `json:"actor"`
	Rationale string    `json:"rationale,omitempty"`
	At        time.Time `json:"at,omitzero"`
	// NextBaseline is the baseline the next study starts from.
	NextBaseline string `json:"next_baseline,omitempty"`
	// Constraints are the design's guardrails and winner-policy clauses on
	// every pair: each can block a winner, none can make one.
	Constraints []Constraint `json:"constraints,omitempty"`
	// Amendments are the corrections appended to the recorded decision,
	// oldest first; the decision above them stays as it was recorded.
	Amendments []Amendment `json:"amendments,omitempty"`
}

// Amendment is one correction appended to the recorded decision.
type Amendment struct {
	Seq       int       `json:"seq"`
	Actor     string    `json:"actor"`
	At        time.Time `json:"at"`
	Rationale string    `json:"rationale"`
}

// Constraint is one guardrail or winner-policy clause on one pair.
type Constraint struct {
	Clause     string `json:"clause"`
	Metric     string `json:"metric"`
	JobKind    string `json:"job_kind"`
	Challenger string `json:"challenger"`
	Baseline   string `json:"baseline"`
	Limit      string `json:"limit"`
	Reading    string `json:"reading"`
	Blocks     bool   `json:"blocks"`
}

// ScoreText is the score with its interval when both are known, "—" when
// the cell has no score (it did not fit, or nothing ran).
func (r CardRow) ScoreText() string {
	if r.Score == nil {
		return "—"
	}
	if r.ScoreLow == nil || r.ScoreHigh == nil {
		return fmt.Sprintf("%.3f", *r.Score)
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", *r.Score, *r.ScoreLow, *r.ScoreHigh)
}
