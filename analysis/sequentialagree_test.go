package analysis

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// agreeingPair is a pass-kind pair whose arms agree on every one of n
// tasks (both pass every third task, both fail the rest), planned for
// planned tasks with a check after every block.
func agreeingPair(n, planned, block int) MonitoredPair {
	same := make([]bool, n)
	for i := range same {
		same[i] = i%3 == 0
	}
	return passPair(same, same, planned, block)
}

// TestMonitorAgreeingPairIsFutile: a pair whose arms agree on every task
// is settled as futile on the whole paired sample, at the first look whose
// futility evidence reaches its bar, well before the plan runs out; under
// every method, with the pilot's discordance or without, and on a score
// kind. Before, futility on pass kinds with the pilot's discordance moved
// only on discordant tasks, so such a pair ran the whole plan.
func TestMonitorAgreeingPairIsFutile(t *testing.T) {
	const planned, block = 100, 8
	for _, s := range []Stopping{
		{Method: Anytime, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
		{Method: Anytime, Alpha: 0.05, Futility: 0.2},
		{Method: GroupSequential, Spending: OBrienFleming, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
		{Method: GroupSequential, Spending: Pocock, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
		{Method: GroupSequential, Spending: Pocock, Alpha: 0.05, Futility: 0.2, Discordance: 0.3, Looks: []float64{0.5, 0.75, 1}},
		{Method: GroupSequential, Spending: OBrienFleming, Alpha: 0.05, Futility: 0.2},
	} {
		for _, measure := range []Measure{MeasurePass, MeasureScore} {
			name := fmt.Sprintf("%s/%s/looks%v/psi%v/%s", s.Method, s.Spending, s.Looks, s.Discordance, measure)
			mp := agreeingPair(planned, planned, block)
			mp.Measure = measure
			look, err := Monitor(MonitorState{Stopping: s, Pairs: []MonitoredPair{mp}})
			if err != nil {
				t.Fatal(err)
			}
			pl := look.Pairs[0]
			if pl.Status != StatusFutile || pl.StoppedAt >= len(mp.Checks)-1 {
				t.Errorf("%s: an agreeing pair is %s after all %d checks (settled at index %d)", name, pl.Status, len(mp.Checks), pl.StoppedAt)
				continue
			}
			t.Logf("%s: futile at check %d (%d of %d tasks)", name, pl.StoppedAt+1, pl.Path[pl.StoppedAt].Tasks, planned)
			// Settled at a look, the first whose evidence reached its bar.
			futBar, agreeBar := 1/DefaultFutilityBeta, math.Inf(1)
			if s.Method == GroupSequential && measure == MeasurePass && s.Discordance > 0 {
				agreeBar = 1 / (DefaultFutilityBeta * AgreementShare)
			}
			for k, pt := range pl.Path[:pl.StoppedAt+1] {
				fe, ae := runningMax(pl.Path[:k+1])
				reached := fe >= futBar || ae >= agreeBar
				if b := float64(pt.FutilityBound); !math.IsNaN(b) && math.Abs(pt.Statistic) <= b {
					reached = true
				}
				if first := k == pl.StoppedAt; pt.Look && reached != first {
					t.Errorf("%s: check %d (look, %d tasks): futility e %v against %v, agreement e %v against %v, settled at check %d", name, k+1, pt.Tasks, fe, futBar, ae, agreeBar, pl.StoppedAt+1)
				}
				if k == pl.StoppedAt && (!pt.Look || pt.Status != StatusFutile) {
					t.Errorf("%s: settled at check %d, which is not a look (%+v)", name, k+1, pt)
				}
			}
			if s.Looks != nil && pl.Path[pl.StoppedAt].Fraction < s.Looks[0] {
				t.Errorf("%s: futile at %v of the plan, before the first planned look", name, pl.Path[pl.StoppedAt].Fraction)
			}
		}
	}
}

// runningMax is the largest futility and agreement e-values on the path.
func runningMax(path []LookPoint) (fut, agree float64) {
	for _, pt := range path {
		if v := float64(pt.FutilityE); v > fut {
			fut = v
		}
		if v := float64(pt.AgreementE); v > agree {
			agree = v
		}
	}
	return fut, agree
}

// TestMonitorCrossedAndAgreeingPairsStop: a study stops when every
// monitored pair is settled, one crossed and one futile because its arms
// agree on every task.
func TestMonitorCrossedAndAgreeingPairsStop(t *testing.T) {
	for _, s := range []Stopping{
		{Method: GroupSequential, Spending: Pocock, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
		{Method: Anytime, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
	} {
		win, lose := make([]bool, 64), make([]bool, 64)
		for i := range win {
			win[i] = i%4 != 0
		}
		strong := passPair(win, lose, 100, 8)
		flat := agreeingPair(64, 100, 8)
		look, err := Monitor(MonitorState{Stopping: s, Pairs: []MonitoredPair{strong, flat}})
		if err != nil {
			t.Fatal(err)
		}
		if !look.Stop || look.End || look.Pairs[0].Status != StatusCrossed || look.Pairs[1].Status != StatusFutile ||
			!strings.Contains(look.Reason, "every monitored comparison is settled") {
			t.Errorf("%s: a crossed and an agreeing pair: stop %v, %s / %s, %q", s.Method, look.Stop, look.Pairs[0].Status, look.Pairs[1].Status, look.Reason)
		}
	}
}

// TestAgreementFutilityValid enumerates every path of n paired pass tasks
// drawn as a trinomial (candidate-only, baseline-only, concordant) for a
// pair at or past the stated difference: the agreement e-process (either
// prior) reaches 1/β with probability at most β, and so does the anytime
// monitor's futility e-process on the whole sample (agreement × discordant
// tasks), so counting concordant tasks gives up no more power than beta
// says. (The group-sequential monitor's union with its exact bound is held
// to beta by the union bound: the bound's own beta is enumerated in
// TestSignTestAgainstEnumeration.) The points are the pilot's own
// discordance, the least a lead of Δ allows (every discordant task the
// leader's), more discordance with a larger lead, and less discordance at
// the pilot's split.
func TestAgreementFutilityValid(t *testing.T) {
	const n, delta, psi, beta = 12, 0.35, 0.5, 0.2
	theta := (psi + delta) / (2 * psi)
	for _, pt := range []struct{ disc, win float64 }{
		{psi, theta}, {delta, 1}, {0.8, 0.9}, {0.4, theta},
	} {
		pb, pc := pt.disc*pt.win, pt.disc*(1-pt.win)
		hitProd, hitAgree, hitNull := 0.0, 0.0, 0.0
		sign := make([]int, n)
		paths := 1
		for range n {
			paths *= 3
		}
		for code := range paths {
			w, c := 1.0, code
			for i := range sign {
				switch c % 3 {
				case 0:
					sign[i], w = 1, w*pb
				case 1:
					sign[i], w = -1, w*pc
				default:
					sign[i], w = 0, w*(1-pt.disc)
				}
				c /= 3
			}
			agree := agreementPath(sign, delta, 0.5)
			prod := discordantFutilityPath(sign, theta)
			for i, a := range agreementPath(sign, delta, 1) {
				prod[i] *= a
			}
			if maxUpTo(prod, n) >= 1/beta {
				hitProd += w
			}
			if maxUpTo(agree, n) >= 1/beta {
				hitAgree += w
			}
			// The path on which the arms agree on every task is futile
			// under either method.
			if code == paths-1 && maxUpTo(prod, n) >= 1/beta && maxUpTo(agree, n) >= 1/(beta*AgreementShare) {
				hitNull = 1
			}
		}
		if hitProd > beta || hitAgree > beta {
			t.Errorf("discordance %v, leader's share %v: futile with probability %v (whole sample), %v (agreement)", pt.disc, pt.win, hitProd, hitAgree)
		}
		if hitNull == 0 {
			t.Errorf("%d tasks on which the arms agree are not futile at β=%v", n, beta)
		}
	}
}
