package analysis

import "math"

// KindTasks is one job kind's per-task values: the unit every number of the
// job kind is computed on (each task's repeats averaged, a blown budget
// scored 0, preempted and missing trials left out). The report embeds them
// so a reader can move the gate and see what the sweep would say there.
type KindTasks struct {
	JobKind string   `json:"job_kind"`
	Gate    float64  `json:"gate"`
	Arms    []string `json:"arms"`
	Tasks   []string `json:"tasks"`
	// Values[t][a] is arm a's value on task t; NaN where it has no scored
	// trial (not encoded as JSON: the report maps NaN to null).
	Values [][]float64 `json:"-"`
}

// PerTask returns the per-task values of every job kind, in the design's
// order: the same table Analyse ranks, sweeps and pairs on.
func PerTask(in Input) []KindTasks {
	d := in.Design.withDefaults()
	tables, _ := buildTables(d, in.Trials)
	out := make([]KindTasks, len(tables))
	for i, tb := range tables {
		out[i] = KindTasks{JobKind: tb.kind.Name, Gate: tb.kind.Gate, Arms: tb.arms, Tasks: tb.tasks, Values: tb.val}
	}
	return out
}

// AtGate is what a job kind's per-task values give if the gate sat
// elsewhere: each arm's pass rate (the threshold sweep's number) and, for a
// pair, the tasks that flip.
type AtGate struct {
	Gate     float64 `json:"gate"`
	PassRate []Num   `json:"pass_rate"` // in the order of KindTasks.Arms
}

// PairAtGate is one pair at a gate, over the tasks both arms have.
type PairAtGate struct {
	Paired       int `json:"paired"`
	NewlyFixed   int `json:"newly_fixed"`
	NewlyFailing int `json:"newly_failing"`
	// PassDelta is the candidate's pass rate minus the baseline's on the
	// paired tasks; NaN with no paired task.
	PassDelta Num `json:"pass_delta"`
}

// At is each arm's pass rate at gate: the share of its tasks with a value
// at or above it. The threshold sweep is At on its grid.
func (k KindTasks) At(gate float64) AtGate {
	g := AtGate{Gate: gate}
	for a := range k.Arms {
		var xs []float64
		for _, row := range k.Values {
			if !math.IsNaN(row[a]) {
				xs = append(xs, row[a])
			}
		}
		g.PassRate = append(g.PassRate, Num(passRate(xs, gate)))
	}
	return g
}

// Pair is candidate against baseline at gate, by arm index. At the job
// kind's own gate its flips are the pair's NewlyFixed and NewlyFailing.
func (k KindTasks) Pair(candidate, baseline int, gate float64) PairAtGate {
	var p PairAtGate
	cp, bp := 0, 0
	for _, row := range k.Values {
		c, b := row[candidate], row[baseline]
		if math.IsNaN(c) || math.IsNaN(b) {
			continue
		}
		p.Paired++
		cpass, bpass := c >= gate, b >= gate
		cp += int(b2f(cpass))
		bp += int(b2f(bpass))
		switch {
		case cpass && !bpass:
			p.NewlyFixed++
		case bpass && !cpass:
			p.NewlyFailing++
		}
	}
	p.PassDelta = Num(math.NaN())
	if p.Paired > 0 {
		p.PassDelta = Num(float64(cp-bp) / float64(p.Paired))
	}
	return p
}
