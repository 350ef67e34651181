package analysis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"
)

// StoppingSim is one simulated setting for a stopping rule: every
// challenger against arm 0 on pass/fail tasks, a check after every block.
type StoppingSim struct {
	Stopping Stopping
	// Arms counts the incumbent; each of the Arms−1 challengers is a
	// monitored pair against it.
	Arms, Tasks int
	// Block is the tasks per block: a check after each (DefaultBlock if 0).
	Block int
	// Lead is challenger 1's true lead (share of tasks); the others have none.
	Lead float64
	// Discordance > 0 draws each task of a two-arm study as discordant with
	// this chance (candidate-only with (ψ+Lead)/2, baseline-only with
	// (ψ−Lead)/2). Zero draws a difficulty per task (Difficulty) and each
	// arm passes independently at it (challenger 1 at it plus Lead,
	// clipped to [0,1]).
	Discordance float64
	// Difficulty is the shape a of the Beta(a, a) each task's difficulty is
	// drawn from where there is no discordance model; 0 means 1 (uniform).
	// Below 1 most tasks are nearly always or nearly never passed.
	Difficulty float64
	// Agree makes every arm pass or fail each task together (at a
	// difficulty drawn per task): no difference, and no discordant task, as
	// when the arms are one model under greedy decoding. Lead must be 0.
	Agree   bool
	Studies int
	Seed    uint64
}

// DefaultBlock is the tasks per block the simulation checks after; the
// plan's default batch size.
const DefaultBlock = 8

// StoppingSimResult is what a StoppingSim measured; rates are shares of
// studies, Tasks are means in paired tasks per pair.
type StoppingSimResult struct {
	Studies int `json:"studies"`
	// AnyHolm is the share with any Holm-significant monitored pair (either
	// direction); Winner with one in the challenger's favour.
	AnyHolm float64 `json:"any_holm"`
	Winner  float64 `json:"winner"`
	// Power is the share in which challenger 1 is Holm-significant in the
	// direction of its lead (when Lead ≠ 0).
	Power float64 `json:"power"`
	// Stopped is the share that stopped before the plan ran out; Futile the
	// share in which challenger 1 was settled as futile.
	Stopped float64 `json:"stopped"`
	Futile  float64 `json:"futile"`
	// Tasks is the mean paired tasks run per pair; the fixed design always
	// runs all of them.
	Tasks float64 `json:"tasks"`
	// The fixed design on the same draws: exact McNemar with Holm at the
	// full task count.
	FixedAnyHolm float64 `json:"fixed_any_holm"`
	FixedWinner  float64 `json:"fixed_winner"`
	FixedPower   float64 `json:"fixed_power"`
}

// SimulateStopping runs the setting's studies through Monitor, stopping at
// the first check where every pair is settled, and the fixed design on the
// same draws.
func SimulateStopping(ctx context.Context, sim StoppingSim) (StoppingSimResult, error) {
	if sim.Block == 0 {
		sim.Block = DefaultBlock
	}
	if sim.Arms < 2 || sim.Tasks < 1 || sim.Studies < 1 || (sim.Discordance > 0 && sim.Arms != 2) || (sim.Agree && (sim.Lead != 0 || sim.Discordance > 0)) {
		return StoppingSimResult{}, &FieldError{Field: "sim", Problem: fmt.Sprintf("%d arms, %d tasks, %d studies, discordance %g, agree %v with lead %g", sim.Arms, sim.Tasks, sim.Studies, sim.Discordance, sim.Agree, sim.Lead),
			Fix: "two or more arms, tasks and studies; a discordance model has two arms; arms that agree have no lead and no discordance"}
	}
	rng := rand.New(rand.NewPCG(sim.Seed, 0x5e9))
	shape := sim.Difficulty
	if shape == 0 {
		shape = 1
	}
	diff := distuv.Beta{Alpha: shape, Beta: shape, Src: rng}
	k := sim.Arms - 1
	checks := simChecks(sim.Tasks, sim.Block)
	pass := make([][]bool, sim.Arms) // [arm][task]
	for a := range pass {
		pass[a] = make([]bool, sim.Tasks)
	}
	var res StoppingSimResult
	res.Studies = sim.Studies
	st := MonitorState{Stopping: sim.Stopping, Pairs: make([]MonitoredPair, k)}
	for range sim.Studies {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		drawStudy(sim, rng, &diff, pass)
		fixed, fixedLead := fillMonitoredPairs(&st, sim.Tasks, checks, pass)
		look, err := Monitor(st)
		if err != nil {
			return res, err
		}
		stop := firstSettledCheck(look, checks)
		if stop < len(checks)-1 {
			res.Stopped++
		}
		res.Tasks += float64(checks[stop])
		ps, leads := readStop(look, st, checks, stop, &res)
		tallyHolm(sim, ps, leads, &res.AnyHolm, &res.Winner, &res.Power)
		fl := make([]float64, k)
		for i, v := range fixedLead {
			fl[i] = float64(v)
		}
		tallyHolm(sim, fixed, fl, &res.FixedAnyHolm, &res.FixedWinner, &res.FixedPower)
	}
	n := float64(sim.Studies)
	for _, v := range []*float64{&res.AnyHolm, &res.Winner, &res.Power, &res.Stopped, &res.Futile, &res.Tasks, &res.FixedAnyHolm, &res.FixedWinner, &res.FixedPower} {
		*v /= n
	}
	return res, nil
}

// simChecks are the task counts checked at: one every block, and the last
// at the plan's end.
func simChecks(tasks, block int) []int {
	var checks []int
	for n := block; ; n += block {
		checks = append(checks, min(n, tasks))
		if n >= tasks {
			break
		}
	}
	return checks
}

// drawStudy draws every arm's pass or fail on each task of one study into
// pass, under the setting's model.
func drawStudy(sim StoppingSim, rng *rand.Rand, diff *distuv.Beta, pass [][]bool) {
	for t := range sim.Tasks {
		if sim.Discordance > 0 {
			u := rng.Float64()
			both := rng.Float64() < 0.5
			switch {
			case u < (sim.Discordance+sim.Lead)/2:
				pass[0][t], pass[1][t] = false, true
			case u < sim.Discordance:
				pass[0][t], pass[1][t] = true, false
			default:
				pass[0][t], pass[1][t] = both, both
			}
			continue
		}
		q := diff.Rand()
		if sim.Agree {
			pass[0][t] = rng.Float64() < q
			for a := range pass {
				pass[a][t] = pass[0][t]
			}
			continue
		}
		for a := range sim.Arms {
			p := q
			if a == 1 {
				p = math.Max(0, math.Min(1, q+sim.Lead))
			}
			pass[a][t] = rng.Float64() < p
		}
	}
}

// fillMonitoredPairs loads each challenger's paired tasks against arm 0
// into st, and returns the fixed design's exact McNemar p-value and lead
// (candidate-only minus baseline-only tasks) per challenger.
func fillMonitoredPairs(st *MonitorState, tasks int, checks []int, pass [][]bool) (fixed []float64, fixedLead []int) {
	k := len(st.Pairs)
	fixed = make([]float64, k)
	fixedLead = make([]int, k)
	for c := 1; c <= k; c++ {
		mp := &st.Pairs[c-1]
		*mp = MonitoredPair{Pair: Pair{Candidate: fmt.Sprintf("arm%d", c), Baseline: "arm0"}, JobKind: "job", Measure: MeasurePass, Planned: tasks, Checks: checks, Tasks: mp.Tasks[:0]}
		b, cc := 0, 0
		for t := range tasks {
			mp.Tasks = append(mp.Tasks, PairedTask{Candidate: b2f(pass[c][t]), Baseline: b2f(pass[0][t])})
			switch {
			case pass[c][t] && !pass[0][t]:
				b++
			case !pass[c][t] && pass[0][t]:
				cc++
			}
		}
		fixed[c-1] = ExactMcNemar(b, cc).P
		fixedLead[c-1] = b - cc
	}
	return fixed, fixedLead
}

// firstSettledCheck is the first check at which every pair is settled, or
// the last check.
func firstSettledCheck(look Look, checks []int) int {
	for j := range checks {
		settled := true
		for _, p := range look.Pairs {
			settled = settled && p.Path[j].Status != StatusContinue
		}
		if settled {
			return j
		}
	}
	return len(checks) - 1
}

// readStop reads each pair's p-value and lead (sum of paired differences)
// at the stopping check, and counts challenger 1 settled as futile there.
func readStop(look Look, st MonitorState, checks []int, stop int, res *StoppingSimResult) (ps, leads []float64) {
	k := len(st.Pairs)
	ps = make([]float64, k)
	leads = make([]float64, k)
	for i, p := range look.Pairs {
		pt := p.Path[stop]
		ps[i] = float64(pt.P)
		n := checks[stop]
		sum := 0.0
		for _, t := range st.Pairs[i].Tasks[:n] {
			sum += t.Candidate - t.Baseline
		}
		leads[i] = sum
		if i == 0 && pt.Status == StatusFutile {
			res.Futile++
		}
	}
	return ps, leads
}

// tallyHolm adds one study's Holm-adjusted verdicts at the setting's alpha:
// any significant pair, one in a challenger's favour, and challenger 1
// significant in the direction of its lead.
func tallyHolm(sim StoppingSim, ps, leads []float64, anyHolm, winner, power *float64) {
	adj := Holm(ps)
	a, w := false, false
	for i, q := range adj {
		if q > sim.Stopping.Alpha {
			continue
		}
		a = true
		w = w || leads[i] > 0
		if i == 0 && sim.Lead != 0 && (leads[i] > 0) == (sim.Lead > 0) && leads[i] != 0 {
			*power++
		}
	}
	*anyHolm += b2f(a)
	*winner += b2f(w)
}
