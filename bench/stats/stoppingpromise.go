package stats

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"

	"rig/analysis"
)

// Rates are what a stopping rule did over simulated studies: the share
// that stopped before the plan ran out, the share in which the first
// challenger was settled as futile, and the mean paired tasks run per pair.
type Rates struct {
	Studies int     `json:"studies"`
	Stopped float64 `json:"stopped"`
	Futile  float64 `json:"futile"`
	Tasks   float64 `json:"tasks"`
}

// PromiseCheck is one truth of a dry run's promise (analysis.StoppingPromise,
// the call the dry run makes) beside a replay of the runner on fresh draws
// of the same truth. Pass says the two stop and futility rates agree within
// three standard errors of their difference.
type PromiseCheck struct {
	Setting  string `json:"setting"`
	Truth    string `json:"truth"`
	Promised Rates  `json:"promised"`
	Replayed Rates  `json:"replayed"`
	Pass     bool   `json:"pass"`
}

// ReplayStopping draws studies of the sim's truth with a generator of its
// own and runs each as the runner's monitor does: after every block the
// block's paired tasks join each pair, a check is appended, Monitor is
// called on everything so far, and the study ends at the first look that
// says stop, or at the end of the plan.
func ReplayStopping(ctx context.Context, sim analysis.StoppingSim) (Rates, error) {
	if sim.Block == 0 {
		sim.Block = analysis.DefaultBlock
	}
	rng := rand.New(rand.NewPCG(sim.Seed, 0x7e9))
	shape := sim.Difficulty
	if shape == 0 {
		shape = 1
	}
	diff := distuv.Beta{Alpha: shape, Beta: shape, Src: rng}
	k := sim.Arms - 1
	pass := make([][]bool, sim.Arms)
	r := Rates{Studies: sim.Studies}
	for range sim.Studies {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		for a := range pass {
			pass[a] = pass[a][:0]
		}
		for range sim.Tasks {
			drawTask(rng, diff.Rand, sim, pass)
		}
		pairs := make([]analysis.MonitoredPair, k)
		for c := range pairs {
			pairs[c] = analysis.MonitoredPair{Pair: analysis.Pair{Candidate: fmt.Sprintf("arm%d", c+1), Baseline: "arm0"}, JobKind: "job",
				Measure: analysis.MeasurePass, Gate: 0.5, Planned: sim.Tasks}
		}
		for n := 0; n < sim.Tasks; {
			next := min(n+sim.Block, sim.Tasks)
			for c := range pairs {
				for t := n; t < next; t++ {
					pairs[c].Tasks = append(pairs[c].Tasks, analysis.PairedTask{Candidate: b2f(pass[c+1][t]), Baseline: b2f(pass[0][t])})
				}
				pairs[c].Checks = append(pairs[c].Checks, next)
			}
			n = next
			look, err := analysis.Monitor(analysis.MonitorState{Stopping: sim.Stopping, Pairs: pairs})
			if err != nil {
				return r, err
			}
			if look.Stop || look.End {
				r.Stopped += b2f(look.Stop)
				r.Futile += b2f(look.Pairs[0].Status == analysis.StatusFutile)
				r.Tasks += float64(n)
				break
			}
		}
	}
	for _, v := range []*float64{&r.Stopped, &r.Futile, &r.Tasks} {
		*v /= float64(sim.Studies)
	}
	return r, nil
}

// drawTask appends one task's pass or fail for every arm, as the sim's
// truth says (analysis.StoppingSim's three models, drawn here apart from
// the simulation's own code).
func drawTask(rng *rand.Rand, difficulty func() float64, sim analysis.StoppingSim, pass [][]bool) {
	switch {
	case sim.Discordance > 0:
		u := rng.Float64()
		c, b := u < (sim.Discordance+sim.Lead)/2, u >= (sim.Discordance+sim.Lead)/2 && u < sim.Discordance
		if u >= sim.Discordance {
			c = rng.Float64() < 0.5
			b = c
		}
		pass[0], pass[1] = append(pass[0], b), append(pass[1], c)
	case sim.Agree:
		q := difficulty()
		p := rng.Float64() < q
		for a := range pass {
			pass[a] = append(pass[a], p)
		}
	default:
		q := difficulty()
		for a := range pass {
			p := q
			if a == 1 {
				p = math.Max(0, math.Min(1, q+sim.Lead))
			}
			pass[a] = append(pass[a], rng.Float64() < p)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// CheckPromise computes the dry run's promise for the rule on the shape
// (the dry run's own call and seed) and replays replays studies of each
// truth through the runner's walk on other draws.
func CheckPromise(ctx context.Context, setting string, rule analysis.Stopping, sh analysis.PromiseShape, replays int, seed uint64) ([]PromiseCheck, error) {
	pr, err := analysis.StoppingPromise(ctx, rule, sh, 1)
	if err != nil {
		return nil, err
	}
	var out []PromiseCheck
	for i, row := range pr.Rows {
		sim := row.Sim
		sim.Studies, sim.Seed = replays, seed+uint64(i)
		got, err := ReplayStopping(ctx, sim)
		if err != nil {
			return out, err
		}
		res := row.Result
		want := Rates{Studies: res.Studies, Stopped: res.Stopped, Futile: res.Futile, Tasks: res.Tasks}
		agree := func(p1, p2 float64) bool {
			se := math.Sqrt(p1*(1-p1)/float64(want.Studies) + p2*(1-p2)/float64(got.Studies))
			return math.Abs(p1-p2) <= 3*se+1e-12
		}
		out = append(out, PromiseCheck{Setting: setting, Truth: row.Name, Promised: want, Replayed: got,
			Pass: agree(want.Stopped, got.Stopped) && agree(want.Futile, got.Futile)})
	}
	return out, nil
}

// PromiseSettings are the shapes `rig bench stats --stopping` checks the
// dry run's promise on: the study of issue 46 (two challengers against one
// incumbent on 27 tasks, the example design's rule) and one pair on 100
// tasks at the bench's own rule.
func PromiseSettings() []struct {
	Name  string
	Rule  analysis.Stopping
	Shape analysis.PromiseShape
} {
	return []struct {
		Name  string
		Rule  analysis.Stopping
		Shape analysis.PromiseShape
	}{
		{"2 pairs, 27 tasks, Pocock, Δ 0.35, ψ 0.5", analysis.Stopping{Method: analysis.GroupSequential, Spending: analysis.Pocock, Alpha: 0.05, Futility: 0.35, Discordance: 0.5},
			analysis.PromiseShape{Pairs: 2, Tasks: 27, Block: 8, Lead: 0.35, Discordance: 0.5}},
		{"2 pairs, 27 tasks, anytime, Δ 0.35, ψ 0.5", analysis.Stopping{Method: analysis.Anytime, Alpha: 0.05, Futility: 0.35, Discordance: 0.5},
			analysis.PromiseShape{Pairs: 2, Tasks: 27, Block: 8, Lead: 0.35, Discordance: 0.5}},
		{"1 pair, 100 tasks, O'Brien–Fleming, Δ 0.2, ψ 0.3", analysis.Stopping{Method: analysis.GroupSequential, Spending: analysis.OBrienFleming, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
			analysis.PromiseShape{Pairs: 1, Tasks: 100, Block: 8, Lead: 0.2, Discordance: 0.3}},
		{"1 pair, 100 tasks, anytime, Δ 0.2, ψ 0.3", analysis.Stopping{Method: analysis.Anytime, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
			analysis.PromiseShape{Pairs: 1, Tasks: 100, Block: 8, Lead: 0.2, Discordance: 0.3}},
	}
}

// BenchPromise prints, per setting and truth, the dry run's promise beside
// the runner's replay; pass is false when any pair of rates disagrees.
func BenchPromise(ctx context.Context, w io.Writer, replays int, seed uint64) (pass bool, err error) {
	pass = true
	if _, err := fmt.Fprintf(w, "\nThe dry run's promise (analysis.StoppingPromise, seed 1, %d studies per truth) against the runner's walk replayed on other draws (seed %d, %d studies):\n\n| setting | truth | stops early: promised / replayed | futile: promised / replayed | mean tasks: promised / replayed | |\n|---|---|---|---|---|---|\n", analysis.PromiseStudies, seed, replays); err != nil {
		return false, err
	}
	for _, st := range PromiseSettings() {
		rows, err := CheckPromise(ctx, st.Name, st.Rule, st.Shape, replays, seed)
		if err != nil {
			return false, err
		}
		for _, r := range rows {
			mark := "ok"
			if !r.Pass {
				mark, pass = "FAIL", false
			}
			if _, err := fmt.Fprintf(w, "| %s | %s | %.3f / %.3f | %.3f / %.3f | %.1f / %.1f | %s |\n", r.Setting, r.Truth,
				r.Promised.Stopped, r.Replayed.Stopped, r.Promised.Futile, r.Replayed.Futile, r.Promised.Tasks, r.Replayed.Tasks, mark); err != nil {
				return false, err
			}
		}
	}
	return pass, nil
}
