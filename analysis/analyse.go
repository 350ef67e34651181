package analysis

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Report is the full analysis of one study.
type Report struct {
	DesignHash     string `json:"design_hash"`
	ComparisonHash string `json:"comparison_hash"`
	// IntervalMethod is the bootstrap the design chose, used by score job
	// kinds; pass job kinds use score intervals for proportions, and each
	// Interval names the method it used.
	IntervalMethod IntervalMethod `json:"interval_method"`
	Level          float64        `json:"level"`
	Resamples      int            `json:"resamples"`
	Seed           uint64         `json:"seed"`
	Alpha          float64        `json:"alpha"`
	// HolmFamily is the number of tests Holm corrects across (job kinds × pairs).
	HolmFamily int          `json:"holm_family"`
	Kinds      []KindResult `json:"kinds"`
	Pairs      []PairResult `json:"pairs"`
	Costs      []Cost       `json:"costs"`
	Power      *PowerReport `json:"power,omitempty"`
	// Latency is every ranked arm's p50 and p95 wall time per job kind,
	// with its difference from the incumbent's.
	Latency []Latency `json:"latency"`
	// Speed is every ranked arm's speed card per job kind: the runtime's
	// own timings beside its cost, with changes against the incumbent's.
	Speed []Speed `json:"speed"`
	// SRM is each job kind's sample-ratio check: scored trials per arm
	// against the plan.
	SRM []SRM `json:"srm"`
	// Constraints are the design's guardrails and winner-policy clauses
	// judged on every pair; one that blocks stops its candidate being
	// switched to.
	Constraints []Constraint `json:"constraints,omitempty"`
	Decision    Decision     `json:"decision"`
	Warnings    []Warning    `json:"warnings"`
	// Sequential is the study's early-stopping record, when its design has
	// a stopping rule: the look it stopped at (or the plan's end) with each
	// monitored pair's path against its boundaries.
	Sequential *Sequential `json:"sequential,omitempty"`
}

// KindResult is the ranking of the arms in one job kind.
type KindResult struct {
	JobKind string  `json:"job_kind"`
	Measure Measure `json:"measure"`
	// RankBy is the job kind's JobKind.RankBy: MetricFidelityKL when its
	// pairs are judged on fidelity, the arms' figures below then being
	// their pass rates, shown beside.
	RankBy string  `json:"rank_by,omitempty"`
	Gate   float64 `json:"gate"`
	Tasks  int     `json:"tasks"` // tasks seen for any arm
	// CommonTasks have a result for every arm; P(best) is computed on them.
	CommonTasks int         `json:"common_tasks"`
	Arms        []ArmResult `json:"arms"`
	// Leader has the highest mean. Verdict is "best" when its P(best) reaches
	// the design's bar and "tie" otherwise; TiedWith is then the smallest set
	// of arms whose P(best) sums to the bar. When the top mean or the top
	// P(best) is shared exactly there is no leader: Leader is empty, the
	// verdict a tie and LeaderPBest the shared P(best). When every arm
	// scored one and the same value on every task the verdict is NoSignal:
	// no leader, no P(best), and TiedWith every arm.
	Leader      string       `json:"leader"`
	LeaderPBest Num          `json:"leader_p_best"`
	Verdict     string       `json:"verdict"`
	TiedWith    []string     `json:"tied_with,omitempty"`
	Sweep       []SweepPoint `json:"sweep"`
	// Costs are per arm in this job kind, in the order of Arms.
	Costs []Cost `json:"costs"`
}

// ArmResult is one arm's summary over tasks.
type ArmResult struct {
	Arm      string   `json:"arm"`
	Tasks    int      `json:"tasks"`
	Mean     Num      `json:"mean"`
	Interval Interval `json:"interval"`
	PassRate Num      `json:"pass_rate"` // share of tasks at or above the gate
	Median   Num      `json:"median"`
	P10      Num      `json:"p10"`
	Worst    Num      `json:"worst"`
	PBest    Num      `json:"p_best"`
	Counts   Counts   `json:"counts"`
	// NoResult are the job kind's tasks with no scored trial for this arm
	// (every trial missing, errored or preempted); they are left out of its
	// numbers, never scored as zero.
	NoResult []string `json:"no_result,omitempty"`
}

// SweepPoint is each arm's pass rate if the gate sat at Gate.
type SweepPoint struct {
	Gate     float64 `json:"gate"`
	PassRate []Num   `json:"pass_rate"` // in the order of KindResult.Arms
}

// PairResult is a named pair in one job kind.
type PairResult struct {
	JobKind   string `json:"job_kind"`
	Candidate string `json:"candidate"`
	Baseline  string `json:"baseline"`
	Tasks     int    `json:"tasks"` // paired tasks tested
	// MissingTasks are tasks of the job kind lacking a result for either arm:
	// missing pairs, never a zero and never dropped silently. Missing names
	// them with the arm(s) that lack a result.
	MissingTasks int           `json:"missing_tasks"`
	Missing      []MissingPair `json:"missing,omitempty"`
	Delta        Num           `json:"delta"` // candidate − baseline, mean over paired tasks
	Interval     Interval      `json:"interval"`
	Test         string        `json:"test"`
	P            Num           `json:"p"`
	PHolm        Num           `json:"p_holm"`
	McNemar      *McNemar      `json:"mcnemar,omitempty"`
	SignFlip     *SignFlip     `json:"sign_flip,omitempty"`
	// NewlyFixed tasks pass (at the gate) for the candidate only; NewlyFailing
	// for the baseline only.
	NewlyFixed   []string `json:"newly_fixed"`
	NewlyFailing []string `json:"newly_failing"`
	// Discordance is the observed share of paired tasks whose pass differs;
	// MinDetectable the lead these tasks detect at 80% power with the exact
	// McNemar test at Holm's strictest step.
	Discordance   Num     `json:"discordance"`
	MinDetectable Num     `json:"min_detectable"`
	CostRatio     Num     `json:"cost_ratio"` // candidate / baseline on the design's cost measure
	Outcome       Outcome `json:"outcome"`
	Reason        string  `json:"reason"`
	// Shown is "shown" when Holm rejects, otherwise "not shown" (never "equal").
	Shown string `json:"shown"`
	// Sequential is the monitor's look at this pair when the design's
	// stopping rule monitors it: P and Interval are then its sequential
	// p-value and confidence sequence.
	Sequential *PairLook `json:"sequential,omitempty"`
	// NotRun are tasks left without a pair because an early stop left
	// their trials unrun: not missing pairs.
	NotRun []string `json:"not_run,omitempty"`

	direction int
	// byFidelity: the pair is judged on fidelity (JobKind.RankBy), and
	// fidelityRead says its figures were found.
	byFidelity, fidelityRead bool
	allEqual                 bool
	// constant: every paired value of both arms is constantValue.
	constant      bool
	constantValue float64
	notComparable string
}

// MissingPair is a task of a pair's job kind that is not a complete pair.
type MissingPair struct {
	Task string `json:"task"`
	// Lacks is the candidate, the baseline, or "both".
	Lacks string `json:"lacks"`
}

// PowerReport restates the design's sizing next to what the study can see.
type PowerReport struct {
	PilotDiscordance float64 `json:"pilot_discordance"`
	Tasks            int     `json:"tasks"`
	Power            float64 `json:"power"`
	Alpha            float64 `json:"alpha"` // the Holm step's alpha used
	MinDetectable    Num     `json:"min_detectable"`
	// SmallestDifference is the design's stated smallest detectable
	// difference; the summary words a pair not shown against it, as the
	// report page does (PairResult.Reading).
	SmallestDifference float64 `json:"smallest_difference,omitempty"`
}

// Analyse computes the report for one study. It validates the input first;
// errors are typed (UnknownArmError, MixedDesignError, FieldError) and wrap
// ErrInvalid.
func Analyse(ctx context.Context, in Input) (*Report, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	d := in.Design.withDefaults()
	hash, err := ComparisonHash(in)
	if err != nil {
		return nil, err
	}
	r := &Report{DesignHash: d.Hash, ComparisonHash: hash, IntervalMethod: d.Interval, Level: d.Level,
		Resamples: d.Resamples, Seed: d.Seed, Alpha: d.Alpha}
	tables, warns := buildTables(d, in.Trials)
	r.Warnings = append(r.Warnings, warns...)
	boots, err := r.rankKinds(ctx, d, tables)
	if err != nil {
		return nil, err
	}
	r.addCosts(d, in.Trials)
	r.HolmFamily = holmFamily(d, tables)
	stepAlpha := HolmStepAlpha(d.Alpha, max(r.HolmFamily, 1), 1)
	if d.Power != nil {
		pr := PlanPower(*d.Power, d.Alpha, r.HolmFamily)
		r.Power = &pr
	}
	if err := r.comparePairs(ctx, d, tables, boots, in, stepAlpha); err != nil {
		return nil, err
	}
	r.classifyPairs(d)
	r.Latency = latencies(d, in.Trials, r.Kinds)
	r.Speed = speeds(d, in.Trials, r.Kinds)
	r.SRM = srms(r.Kinds, in.Trials)
	for _, s := range r.SRM {
		if s.Mismatch {
			r.Warnings = append(r.Warnings, Warning{JobKind: s.JobKind, Message: "sample-ratio mismatch: " + s.String() + "; some arm lost more trials than chance explains: read its failures before its numbers"})
		}
	}
	r.Constraints = constraints(d, in.Trials, in.Fidelity, r)
	// Set before the rule is evaluated: its sizing check reads the plan's
	// size from the stop.
	r.Sequential = in.Sequential
	dec, err := d.Rule.evaluate(d, r)
	if err != nil {
		return nil, err
	}
	dec.ComparisonHash = hash
	if c := in.Sequential.stopClause(); c != "" {
		dec.Trace = append([]string{c}, dec.Trace...)
	}
	r.Decision = dec
	return r, nil
}

// rankKinds ranks the arms of each job kind's table into r.Kinds, warning
// of a job kind with no signal, and returns each kind's shared bootstrap.
func (r *Report) rankKinds(ctx context.Context, d Design, tables []*table) ([]shared, error) {
	boots := make([]shared, len(tables))
	for i, tb := range tables {
		kr, sh, err := rank(ctx, d, tb, uint64(i)*1000+1)
		if err != nil {
			return nil, fmt.Errorf("job kind %s: %w", tb.kind.Name, err)
		}
		r.Kinds = append(r.Kinds, kr)
		boots[i] = sh
		if kr.Verdict == NoSignal {
			r.Warnings = append(r.Warnings, noSignalWarning(kr, tb, tb.complete(allColumns(len(tb.arms))...)))
		}
	}
	return boots, nil
}

// addCosts sets each arm's cost over the study and within each job kind.
func (r *Report) addCosts(d Design, trials []Trial) {
	for _, a := range d.Arms {
		r.Costs = append(r.Costs, costOf(trials, a.Name, ""))
		for i := range r.Kinds {
			r.Kinds[i].Costs = append(r.Kinds[i].Costs, costOf(trials, a.Name, r.Kinds[i].JobKind))
		}
	}
}

// holmFamily is the size of Holm's family: every named pair in every job
// kind that runs both of its arms.
func holmFamily(d Design, tables []*table) int {
	n := 0
	for _, tb := range tables {
		for _, p := range d.Pairs {
			if comparable(d, p) == "" && tb.has(p.Candidate) && tb.has(p.Baseline) {
				n++
			}
		}
	}
	return n
}

// comparePairs compares each named pair in each job kind that runs both of
// its arms into r.Pairs, reading the sequential record, and sets the Holm
// adjusted p-value of each pair that was tested.
func (r *Report) comparePairs(ctx context.Context, d Design, tables []*table, boots []shared, in Input, stepAlpha float64) error {
	var ps []float64
	var tested []int
	for i, tb := range tables {
		for j, p := range d.Pairs {
			if !tb.has(p.Candidate) || !tb.has(p.Baseline) {
				continue // the pair does not meet in this job kind
			}
			pr, err := pair(ctx, d, tb, boots[i], in.Trials, p, stepAlpha, uint64(i)*1000+uint64(j)+500)
			if err != nil {
				return fmt.Errorf("job kind %s, pair %s: %w", tb.kind.Name, p, err)
			}
			if tb.kind.RankBy == MetricFidelityKL {
				pr.rankByFidelity(in.Fidelity)
			} else {
				pr.applySequential(in.Sequential)
			}
			pr.dropNotRun(in.Sequential)
			if pr.notComparable == "" && pr.Tasks > 0 {
				ps = append(ps, float64(pr.P))
				tested = append(tested, len(r.Pairs))
			}
			r.Pairs = append(r.Pairs, pr)
		}
	}
	for k, adj := range Holm(padFamily(ps, r.HolmFamily)) {
		if k < len(tested) {
			r.Pairs[tested[k]].PHolm = Num(adj)
		}
	}
	return nil
}

// classifyPairs sets each pair's outcome and whether it was shown, and
// warns of a comparable pair with missing pairs.
func (r *Report) classifyPairs(d Design) {
	for i := range r.Pairs {
		p := &r.Pairs[i]
		classify(p, d.Alpha, d.CostFactor)
		p.Shown = "not shown"
		if (p.Outcome == Improvement || p.Outcome == Regression || p.Outcome == Tradeoff) && (p.byFidelity || float64(p.PHolm) <= d.Alpha) {
			p.Shown = "shown"
		}
		switch {
		case p.allEqual && p.constant && p.Outcome == Inconclusive:
			p.Shown = "no signal"
		case p.Outcome == Tie:
			p.Shown = "no difference in any task"
		}
		if p.MissingTasks > 0 && p.notComparable == "" {
			var parts []string
			for _, m := range p.Missing {
				parts = append(parts, m.Task+" lacks "+m.Lacks)
			}
			r.Warnings = append(r.Warnings, Warning{JobKind: p.JobKind, Message: fmt.Sprintf("%s vs %s: %d missing pairs (%s); a missing pair is neither a zero nor dropped: the outcome is %s",
				p.Candidate, p.Baseline, p.MissingTasks, listTasks(parts), p.Outcome)})
		}
	}
}

// padFamily keeps Holm's family at its planned size when a pair had no
// paired tasks: a test that could not run still counted against alpha when
// the study was sized, so the survivors are not let off more lightly.
func padFamily(ps []float64, family int) []float64 {
	for len(ps) < family {
		ps = append(ps, 1)
	}
	return ps
}

func comparable(d Design, p Pair) string {
	var c, b Arm
	for _, a := range d.Arms {
		switch a.Name {
		case p.Candidate:
			c = a
		case p.Baseline:
			b = a
		}
	}
	switch {
	case c.JudgeID != b.JudgeID:
		return fmt.Sprintf("judge identities differ (%q vs %q); scores are on different scales", c.JudgeID, b.JudgeID)
	case c.CalibrationID != b.CalibrationID:
		return fmt.Sprintf("calibration identities differ (%q vs %q); scores are on different scales", c.CalibrationID, b.CalibrationID)
	}
	return ""
}

// shared is a job kind's bootstrap over the tasks every arm has: column a's
// resample means at boot[a*B:(a+1)*B]. Pairs on the same tasks reuse its
// draws, since the mean difference is the difference of the means.
type shared struct {
	boot   []float64
	common int
}

func rank(ctx context.Context, d Design, tb *table, stream uint64) (KindResult, shared, error) {
	kr := KindResult{JobKind: tb.kind.Name, Measure: tb.kind.Measure, RankBy: tb.kind.RankBy, Gate: tb.kind.Gate, Tasks: len(tb.tasks)}
	k := len(tb.arms)
	all := make([]int, k)
	for a := range all {
		all[a] = a
	}
	common := tb.complete(all...)
	kr.CommonTasks = len(common)
	x := make([]float64, 0, len(common)*k)
	for _, i := range common {
		x = append(x, tb.val[i]...)
	}
	boot, err := resampler{x: x, n: len(common), k: k}.means(ctx, d.Resamples, d.Seed, stream)
	if err != nil {
		return kr, shared{}, err
	}
	sh := shared{boot: boot, common: len(common)}
	pb := pBest(boot, k, d.Resamples)
	if len(common) == 0 {
		for a := range pb {
			pb[a] = math.NaN()
		}
	}
	if err := rankArms(ctx, d, tb, &kr, sh, pb, stream); err != nil {
		return kr, sh, err
	}
	kt := KindTasks{JobKind: tb.kind.Name, Gate: tb.kind.Gate, Arms: tb.arms, Tasks: tb.tasks, Values: tb.val}
	for g := 0; g <= 20; g++ {
		at := kt.At(float64(g) / 20)
		kr.Sweep = append(kr.Sweep, SweepPoint(at))
	}
	if len(common) == 0 {
		kr.Verdict = "no common tasks"
		return kr, sh, nil
	}
	if k > 1 && sameEverywhere(tb, common) {
		// P(best) splits evenly by construction here, which is no evidence
		// of a tie: nothing that could tell the arms apart was measured.
		kr.Verdict, kr.LeaderPBest = NoSignal, Num(math.NaN())
		kr.TiedWith = append([]string(nil), tb.arms...)
		return kr, sh, nil
	}
	pickLeader(&kr, d, tb, pb, all)
	return kr, sh, nil
}

// rankArms appends each arm's result to kr.Arms: its summary over the
// tasks it has, P(best), and its interval (from the shared draws when the
// arm has every common task, else from its own seeded bootstrap).
func rankArms(ctx context.Context, d Design, tb *table, kr *KindResult, sh shared, pb []float64, stream uint64) error {
	boot := sh.boot
	for a, name := range tb.arms {
		rows := tb.complete(a)
		xs := make([]float64, len(rows))
		for j, i := range rows {
			xs[j] = tb.val[i][a]
		}
		var ab []float64
		if len(rows) == sh.common {
			// interval sorts its argument; the shared draws stay in order.
			ab = append([]float64(nil), boot[a*d.Resamples:(a+1)*d.Resamples]...)
		} else {
			var err error
			ab, err = resampler{x: xs, n: len(xs), k: 1}.means(ctx, d.Resamples, d.Seed, stream+uint64(a)+100)
			if err != nil {
				return err
			}
		}
		s := sortedCopy(xs)
		ar := ArmResult{Arm: name, Tasks: len(xs), Mean: Num(mean(xs)), PBest: Num(pb[a]), Counts: tb.counts[a], NoResult: tb.noResult[a],
			Median: Num(quantile(s, 0.5)), P10: Num(quantile(s, 0.1)), Worst: Num(math.NaN()), PassRate: Num(passRate(xs, tb.kind.Gate))}
		if len(s) > 0 {
			ar.Worst = Num(s[0])
		}
		if tb.kind.Measure == MeasurePass {
			ar.Interval = RateInterval(xs, tb.trials(rows, a), d.Level)
		} else {
			ar.Interval = bootInterval(d.Interval, d.Level, xs, ab, 0, 1)
		}
		kr.Arms = append(kr.Arms, ar)
	}
	return nil
}

// pickLeader sets the verdict of a job kind with a signal: "best" for a
// sole leader by mean whose P(best) reaches the bar, else "tie" with the
// fewest arms, by P(best), whose P(best) together reaches it.
func pickLeader(kr *KindResult, d Design, tb *table, pb []float64, all []int) {
	k := len(all)
	order := make([]int, k)
	copy(order, all)
	sort.SliceStable(order, func(i, j int) bool { return kr.Arms[order[i]].Mean > kr.Arms[order[j]].Mean })
	lead := order[0]
	kr.Leader, kr.LeaderPBest = tb.arms[lead], Num(pb[lead])
	// A leader shared exactly (in mean or in P(best)) is no leader: which
	// arm came first would be the order the design listed them in.
	shared := false
	for a := range k {
		if a != lead && (kr.Arms[a].Mean == kr.Arms[lead].Mean || pb[a] == pb[lead]) {
			shared = true
		}
	}
	if shared {
		kr.Leader, kr.LeaderPBest = "", Num(slices.Max(pb))
	} else if pb[lead] >= d.PBestBar {
		kr.Verdict = "best"
		return
	}
	kr.Verdict = "tie"
	byP := append([]int(nil), all...)
	sort.SliceStable(byP, func(i, j int) bool { return pb[byP[i]] > pb[byP[j]] })
	cum := 0.0
	for _, a := range byP {
		kr.TiedWith = append(kr.TiedWith, tb.arms[a])
		cum += pb[a]
		if cum >= d.PBestBar-1e-12 {
			break
		}
	}
}

func passRate(xs []float64, gate float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	n := 0
	for _, x := range xs {
		if x >= gate {
			n++
		}
	}
	return float64(n) / float64(len(xs))
}

func pair(ctx context.Context, d Design, tb *table, sh shared, trials []Trial, p Pair, stepAlpha float64, stream uint64) (PairResult, error) {
	pr := PairResult{JobKind: tb.kind.Name, Candidate: p.Candidate, Baseline: p.Baseline,
		P: Num(math.NaN()), PHolm: Num(math.NaN()), Delta: Num(math.NaN()), Discordance: Num(math.NaN()), MinDetectable: Num(math.NaN()),
		NewlyFixed: []string{}, NewlyFailing: []string{}}
	ci, bi := tb.pairColumns(p)
	cc, bc := costOf(trials, p.Candidate, tb.kind.Name), costOf(trials, p.Baseline, tb.kind.Name)
	pr.CostRatio = Num(cc.value(d.CostMeasure) / bc.value(d.CostMeasure))
	pr.Interval = Interval{Level: d.Level, Method: d.Interval, Lo: Num(math.NaN()), Hi: Num(math.NaN())}
	if tb.kind.Measure == MeasurePass {
		pr.Interval.Method = TangoEdges
	}
	pr.notComparable = comparable(d, p)
	pr.findMissing(tb, p, ci, bi)
	rows := tb.complete(ci, bi)
	pr.Tasks = len(rows)
	if pr.notComparable != "" || len(rows) == 0 {
		return pr, nil
	}
	diffs := pr.readTasks(tb, rows, ci, bi)
	pr.Delta = Num(mean(diffs))
	if tb.kind.Measure == MeasurePass {
		cs, bs := make([]float64, len(rows)), make([]float64, len(rows))
		for j, i := range rows {
			cs[j], bs[j] = tb.val[i][ci], tb.val[i][bi]
		}
		pr.Interval = DeltaInterval(cs, bs, min(tb.trials(rows, ci), tb.trials(rows, bi)), d.Level)
	} else if err := pr.bootDelta(ctx, d, sh, ci, bi, diffs, stream); err != nil {
		return pr, err
	}
	b, c := len(pr.NewlyFixed), len(pr.NewlyFailing)
	psi := float64(b+c) / float64(len(rows))
	pr.Discordance = Num(psi)
	if md, ok := MinDetectable(len(rows), psi, stepAlpha, 0.8); ok {
		pr.MinDetectable = Num(md)
	}
	if tb.kind.Measure == MeasurePass {
		m := ExactMcNemar(b, c)
		pr.McNemar, pr.P, pr.Test = &m, Num(m.P), "exact McNemar (two-sided binomial on discordant tasks)"
		pr.direction = sign(float64(b - c))
		return pr, nil
	}
	err := pr.signFlip(ctx, d, diffs, stream)
	return pr, err
}

// pairColumns are the table columns of the pair's candidate and baseline.
func (t *table) pairColumns(p Pair) (ci, bi int) {
	for a, name := range t.arms {
		switch name {
		case p.Candidate:
			ci = a
		case p.Baseline:
			bi = a
		}
	}
	return ci, bi
}

// findMissing counts and names the tasks that one or both of the pair's
// arms have no result for.
func (pr *PairResult) findMissing(tb *table, p Pair, ci, bi int) {
	for i, row := range tb.val {
		cm, bm := math.IsNaN(row[ci]), math.IsNaN(row[bi])
		if !cm && !bm {
			continue
		}
		pr.MissingTasks++
		lacks := "both"
		switch {
		case !bm:
			lacks = p.Candidate
		case !cm:
			lacks = p.Baseline
		}
		pr.Missing = append(pr.Missing, MissingPair{Task: tb.tasks[i], Lacks: lacks})
	}
}

// readTasks returns the pair's per-task differences over rows, noting
// whether the arms agree on every task (and on one value), and the tasks
// newly fixed or newly failing at the gate.
func (pr *PairResult) readTasks(tb *table, rows []int, ci, bi int) []float64 {
	diffs := make([]float64, len(rows))
	pr.allEqual, pr.constant, pr.constantValue = true, true, tb.val[rows[0]][ci]
	gate := tb.kind.Gate
	for j, i := range rows {
		c, b := tb.val[i][ci], tb.val[i][bi]
		diffs[j] = c - b
		if c != b {
			pr.allEqual = false
		}
		if c != pr.constantValue || b != pr.constantValue {
			pr.constant = false
		}
		switch cp, bp := c >= gate, b >= gate; {
		case cp && !bp:
			pr.NewlyFixed = append(pr.NewlyFixed, tb.tasks[i])
		case bp && !cp:
			pr.NewlyFailing = append(pr.NewlyFailing, tb.tasks[i])
		}
	}
	return diffs
}

// signFlip tests a score pair's per-task differences with the seeded
// sign-flip permutation test.
func (pr *PairResult) signFlip(ctx context.Context, d Design, diffs []float64, stream uint64) error {
	sf, err := SignFlipTest(ctx, diffs, d.PermutationResamples, d.Seed^stream)
	if err != nil {
		return err
	}
	pr.SignFlip, pr.P = &sf, Num(sf.P)
	pr.Test = "exact sign-flip permutation test on per-task differences"
	if !sf.Exact {
		pr.Test = fmt.Sprintf("Monte Carlo sign-flip permutation test (%d seeded resamples)", sf.Resamples)
	}
	pr.direction = sign(float64(pr.Delta))
	return nil
}

func sign(x float64) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// has reports whether the job kind's table ranks the named arm.
func (t *table) has(arm string) bool {
	for _, a := range t.arms {
		if a == arm {
			return true
		}
	}
	return false
}

// bootDelta sets a score pair's interval from the bootstrap of its per-task
// differences, reusing the job kind's shared draws when the pair has every
// common task (the mean difference is the difference of the means).
func (pr *PairResult) bootDelta(ctx context.Context, d Design, sh shared, ci, bi int, diffs []float64, stream uint64) error {
	var boot []float64
	if len(diffs) == sh.common {
		B := d.Resamples
		boot = make([]float64, B)
		for b := range boot {
			boot[b] = sh.boot[ci*B+b] - sh.boot[bi*B+b]
		}
	} else {
		var err error
		boot, err = resampler{x: diffs, n: len(diffs), k: 1}.means(ctx, d.Resamples, d.Seed, stream)
		if err != nil {
			return err
		}
	}
	pr.Interval = bootInterval(d.Interval, d.Level, diffs, boot, -1, 1)
	return nil
}

// trials is the number of scored trials behind column a's values in rows.
func (t *table) trials(rows []int, a int) int {
	n := 0
	for _, i := range rows {
		n += t.reps[i][a]
	}
	return n
}

// Ranking verdicts besides "best", "tie" and "no common tasks".
const (
	// NoSignal: every arm has one and the same value on every common task
	// (every arm failed everything, or passed everything), so the study
	// measured nothing about which arm is better.
	NoSignal = "no signal"
)

// sameEverywhere reports whether every arm has one and the same value on
// every one of the rows: every arm failed every task, or passed every task.
// Arms that agree task by task on a bank that tells tasks apart are not
// this: that is a tie, measured.
func sameEverywhere(tb *table, rows []int) bool {
	v0 := tb.val[rows[0]][0]
	for _, i := range rows {
		for _, v := range tb.val[i] {
			if v != v0 {
				return false
			}
		}
	}
	return true
}

// noSignalWarning says plainly what a job kind with no signal measured.
func noSignalWarning(kr KindResult, tb *table, rows []int) Warning {
	first := tb.val[rows[0]][0]
	var what string
	switch {
	case first == 0:
		what = fmt.Sprintf("no arm passed any of the %d tasks (every arm scored 0 on every task)", len(rows))
		if kr.Measure == MeasureScore {
			what = fmt.Sprintf("every arm scored 0 on every one of the %d tasks", len(rows))
		}
	case first == 1:
		what = fmt.Sprintf("every arm passed every one of the %d tasks", len(rows))
		if kr.Measure == MeasureScore {
			what = fmt.Sprintf("every arm scored 1 on every one of the %d tasks", len(rows))
		}
	default:
		what = fmt.Sprintf("every arm scored %.3g on every one of the %d tasks", first, len(rows))
	}
	return Warning{JobKind: kr.JobKind, Message: what + ": the study measured nothing that tells the arms apart. The outcome is no signal, not a tie, and no arm leads; read the sampled outputs before reading any number (an arm that cannot do the task at all, or tasks every arm gets right, make every comparison empty)"}
}

func allColumns(k int) []int {
	all := make([]int, k)
	for a := range all {
		all[a] = a
	}
	return all
}
