package analysis

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Counts tallies what happened to an arm's trials in one job kind.
type Counts struct {
	Trials      int `json:"trials"`
	Scored      int `json:"scored"`
	Preempted   int `json:"preempted"`
	BudgetBlown int `json:"budget_blown"`
	// Capped counts scored trials that hit any cap, Truncated those of them
	// that stopped at the stop cap.
	Capped    int `json:"capped"`
	Truncated int `json:"truncated"`
	Missing   int `json:"missing"`
	// TasksMissing counts tasks with no scored trial for this arm; they are
	// left out (with a warning), never scored as zero.
	TasksMissing int `json:"tasks_missing"`
}

// Warning is something a reader must see beside the numbers.
type Warning struct {
	JobKind string `json:"job_kind,omitempty"`
	Arm     string `json:"arm,omitempty"`
	Message string `json:"message"`
}

func (w Warning) String() string {
	s := w.Message
	if w.Arm != "" {
		s = w.Arm + ": " + s
	}
	if w.JobKind != "" {
		s = w.JobKind + ": " + s
	}
	return s
}

// table is one job kind's per-task values: rows are tasks, columns arms, with
// NaN where an arm has no scored trial for the task.
type table struct {
	kind  JobKind
	tasks []string
	arms  []string
	val   [][]float64
	// reps is the number of scored trials behind each value.
	reps   [][]int
	counts []Counts
	// noResult lists, per column, the tasks with no scored trial.
	noResult [][]string
}

// buildTables averages each task's repeats per arm. Preempted and missing
// trials are skipped; a blown budget is a failure (0) at this card size;
// capped trials keep their grade and are counted apart.
func buildTables(d Design, trials []Trial) ([]*table, []Warning) {
	armIdx := map[string]int{}
	arms := make([]string, len(d.Arms))
	for i, a := range d.Arms {
		armIdx[a.Name] = i
		arms[i] = a.Name
	}
	var out []*table
	var warns []Warning
	for _, k := range d.JobKinds {
		acc := accumulateKind(k, trials, armIdx, arms)
		present := acc.present()
		cols := acc.only(present)
		tb := &table{kind: k, arms: cols.names, counts: cols.counts, noResult: make([][]string, len(present))}
		fillTable(tb, acc.sums, present)
		warns = append(warns, columnWarnings(k, tb, cols)...)
		if len(tb.tasks) == 0 {
			warns = append(warns, Warning{JobKind: k.Name, Message: "no trials"})
		}
		out = append(out, tb)
	}
	return out, warns
}

// taskAcc sums one arm's scored repeats of one task.
type taskAcc struct {
	sum float64
	n   int
}

// armColumns are one job kind's per-arm tallies, a column per arm.
type armColumns struct {
	names   []string
	counts  []Counts
	stopCap []map[int]bool
	capped  []cappedOutputs
	why     []map[string]int
}

// kindAcc is one job kind's trials summed per task and arm, with every
// declared arm's tallies.
type kindAcc struct {
	sums map[string][]taskAcc
	armColumns
}

// accumulateKind sums job kind k's trials per task and arm and counts
// what each arm's trials were: missing, preempted, capped, truncated at
// the stop cap, over budget, scored.
func accumulateKind(k JobKind, trials []Trial, armIdx map[string]int, arms []string) *kindAcc {
	acc := &kindAcc{sums: map[string][]taskAcc{}, armColumns: armColumns{
		names:   arms,
		counts:  make([]Counts, len(arms)),
		stopCap: make([]map[int]bool, len(arms)),
		capped:  make([]cappedOutputs, len(arms)),
		why:     make([]map[string]int, len(arms)),
	}}
	for _, t := range trials {
		if t.JobKind != k.Name {
			continue
		}
		a := armIdx[t.Arm]
		row, ok := acc.sums[t.Task]
		if !ok {
			row = make([]taskAcc, len(arms))
			acc.sums[t.Task] = row
		}
		c := &acc.counts[a]
		c.Trials++
		switch {
		case t.Missing:
			c.Missing++
			if acc.why[a] == nil {
				acc.why[a] = map[string]int{}
			}
			acc.why[a][orDefault(t.Reason, "no result")]++
			continue
		case t.Preempted:
			c.Preempted++
			continue
		}
		if t.Capped || t.Truncated {
			c.Capped++
		}
		v := t.Score
		if k.Measure == MeasurePass {
			v = b2f(t.Pass)
		}
		if t.Truncated {
			c.Truncated++
			if acc.stopCap[a] == nil {
				acc.stopCap[a] = map[int]bool{}
			}
			acc.stopCap[a][t.StopCap] = true
			if t.RepeatsPrompt {
				acc.capped[a].echo++
			}
			if v >= k.Gate && !t.BudgetBlown {
				acc.capped[a].passed++
			}
		}
		if t.BudgetBlown {
			c.BudgetBlown++
			v = 0
		}
		c.Scored++
		row[a].sum += v
		row[a].n++
	}
	return acc
}

// present lists the arms, by declared index, that the job kind ranks.
func (acc *kindAcc) present() []int {
	// A job kind ranks only the arms that run it: an arm with no trial
	// of any kind here (it was never planned for this job kind) is left
	// out, not shown as missing everything.
	var present []int
	for a := range acc.names {
		if acc.counts[a].Trials > 0 {
			present = append(present, a)
		}
	}
	if len(present) == 0 {
		for a := range acc.names {
			present = append(present, a)
		}
	}
	return present
}

// only keeps the columns of the present arms, in their order.
func (acc *kindAcc) only(present []int) armColumns {
	cols := armColumns{
		names:   make([]string, len(present)),
		counts:  make([]Counts, len(present)),
		stopCap: make([]map[int]bool, len(present)),
		capped:  make([]cappedOutputs, len(present)),
		why:     make([]map[string]int, len(present)),
	}
	for j, a := range present {
		cols.names[j], cols.counts[j], cols.stopCap[j], cols.capped[j], cols.why[j] = acc.names[a], acc.counts[a], acc.stopCap[a], acc.capped[a], acc.why[a]
	}
	return cols
}

// fillTable sets tb's tasks, in order, and each present arm's mean over a
// task's scored repeats; a task an arm has none of is NaN, counted in the
// arm's TasksMissing and listed in its noResult.
func fillTable(tb *table, sums map[string][]taskAcc, present []int) {
	tb.tasks = sortedKeys(sums)
	tb.val = make([][]float64, len(tb.tasks))
	tb.reps = make([][]int, len(tb.tasks))
	for i, task := range tb.tasks {
		row := make([]float64, len(present))
		tb.reps[i] = make([]int, len(present))
		for j, a := range present {
			s := sums[task][a]
			tb.reps[i][j] = s.n
			if s.n == 0 {
				row[j] = math.NaN()
				tb.counts[j].TasksMissing++
				tb.noResult[j] = append(tb.noResult[j], task)
				continue
			}
			row[j] = s.sum / float64(s.n)
		}
		tb.val[i] = row
	}
}

// columnWarnings says, per arm of the table, what was left out or capped.
func columnWarnings(k JobKind, tb *table, cols armColumns) []Warning {
	var warns []Warning
	for a, c := range cols.counts {
		if c.TasksMissing > 0 {
			warns = append(warns, Warning{JobKind: k.Name, Arm: cols.names[a], Message: fmt.Sprintf("%d of %d tasks have no scored trial (%s; missing %d, preempted %d trials%s); left out, not scored as zero",
				c.TasksMissing, len(tb.tasks), listTasks(tb.noResult[a]), c.Missing, c.Preempted, whyText(cols.why[a]))})
		} else if c.Missing > 0 {
			warns = append(warns, Warning{JobKind: k.Name, Arm: cols.names[a], Message: fmt.Sprintf("%d trials missing%s; their tasks are averaged over the repeats that ran", c.Missing, whyText(cols.why[a]))})
		}
		if c.Truncated > 0 {
			warns = append(warns, Warning{JobKind: k.Name, Arm: cols.names[a], Message: stopCapText(c, cols.stopCap[a], cols.capped[a], cols.names[a])})
		}
		if other := c.Capped - c.Truncated; other > 0 {
			warns = append(warns, Warning{JobKind: k.Name, Arm: cols.names[a], Message: fmt.Sprintf("%d trials hit a harness's turn, token or time cap; scored as graded and reported apart", other)})
		}
	}
	return warns
}

// listTasks names tasks for a warning, at most ten of them.
func listTasks(ts []string) string {
	if len(ts) > 10 {
		return fmt.Sprintf("%s and %d more", strings.Join(ts[:10], ", "), len(ts)-10)
	}
	return strings.Join(ts, ", ")
}

// whyText says why trials are missing, most frequent reason first.
func whyText(why map[string]int) string {
	if len(why) == 0 {
		return ""
	}
	rs := sortedKeys(why)
	sort.SliceStable(rs, func(i, j int) bool { return why[rs[i]] > why[rs[j]] })
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s ×%d", r, why[r])
	}
	return "; why: " + strings.Join(parts, "; ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// capText names the stop_cap pins the truncated trials ran under; zero is a
// receipt that did not record its pin.
func capText(caps map[int]bool) string {
	var ns []int
	for n := range caps {
		if n > 0 {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return "stop_cap not recorded on the receipts"
	}
	sort.Ints(ns)
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return "stop_cap " + strings.Join(parts, ", ") + " tokens"
}

// complete returns the rows where every listed arm has a value.
func (t *table) complete(arms ...int) []int {
	var rows []int
	for i, row := range t.val {
		ok := true
		for _, a := range arms {
			if math.IsNaN(row[a]) {
				ok = false
				break
			}
		}
		if ok {
			rows = append(rows, i)
		}
	}
	return rows
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// quantile is the type-7 (linear interpolation between order statistics)
// sample quantile of sorted xs, R's and NumPy's default, which the
// bootstrap intervals and their reference values (testdata/reference.json)
// use. gonum's stat.Quantile offers Empirical (nearest rank) and LinInterp
// (type 4), neither of which gives the same intervals.
func quantile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 || math.IsNaN(p) {
		return math.NaN()
	}
	p = math.Min(1, math.Max(0, p)) // BCa can push a level past the ends
	h := p * float64(n-1)
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

func sortedCopy(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}

// cappedOutputs reads an arm's trials that stopped at the stop cap.
type cappedOutputs struct {
	echo   int // outputs that repeat the task's prompt
	passed int // trials that passed the gate all the same
}

// stopCapText states how many trials the stop cap ended and under which
// cap, and says what would help. Raising the cap is advised only when the
// capped outputs look like answers cut short (some passed, none repeats
// the prompt): a model that repeats the prompt or wanders off task runs to
// any cap, and a larger one only lengthens the same output.
func stopCapText(c Counts, caps map[int]bool, co cappedOutputs, arm string) string {
	fact := fmt.Sprintf("%d of %d scored trials stopped at the stop cap (%s); they are scored as graded and counted as capped", c.Truncated, c.Scored, capText(caps))
	switch {
	case co.echo > 0:
		return fact + fmt.Sprintf(". %d of them repeat the task's prompt instead of answering it: the model is continuing the text, not answering (a base model, or a prompt format it was not trained on), and a larger cap would only lengthen the same output. Read %s's sampled outputs and check its model file and prompt format", co.echo, arm)
	case co.passed == 0:
		return fact + fmt.Sprintf(". None of them passed, so the cap may not be what failed them: read %s's sampled outputs. A larger stop cap helps only answers that were on task and cut short; an output that is off task runs to any cap", arm)
	}
	return fact + fmt.Sprintf(", and %d of them passed all the same, so the outputs are on task and the cap cut some short: to let them finish, raise arms[].pins.stop_cap for %s in the design file and register it as a new study (the pins are part of the design key)", co.passed, arm)
}
