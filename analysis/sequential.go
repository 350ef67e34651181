package analysis

import (
	"fmt"
	"math"
	"rig/internal/stoprule"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Early stopping: the tests a runner checks between blocks of the plan so a
// study can stop once every monitored comparison is settled, with p-values
// and intervals that stay valid at the time it stopped. The rule is frozen
// with the design (Stopping); Monitor is the one entry point.
//
// Multiplicity: the family-wise alpha is split evenly over the K monitored
// comparisons (every pair × job kind), so each boundary is at alpha/K —
// the level Holm's first step faces. Every p-value Monitor reports is valid
// at any stopping time, so Holm over the K of them at the end keeps the
// family's error at alpha and may declare pairs the boundaries did not.

// SequentialMethod names how a stopping rule tests at interim looks.
type SequentialMethod string

const (
	// Anytime uses e-processes: valid at every look, however many, by
	// Ville's inequality. Pass kinds use a beta-binomial mixture on the
	// discordant tasks; score kinds a betting e-process on the paired
	// differences.
	Anytime SequentialMethod = stoprule.Anytime
	// GroupSequential uses Lan–DeMets alpha spending at the looks, with
	// boundaries computed exactly for the sign test on the discordant tasks
	// (score kinds: on the signs of the non-zero differences), conditional
	// on the discordant counts seen at each look.
	GroupSequential SequentialMethod = stoprule.GroupSequential
)

// Spending names a Lan–DeMets alpha-spending function.
type Spending string

const (
	// OBrienFleming spends little early: α(t) = 2 − 2Φ(z_{1−α/2}/√t).
	OBrienFleming Spending = stoprule.OBrienFleming
	// Pocock spends evenly: α(t) = α·ln(1 + (e−1)t).
	Pocock Spending = stoprule.Pocock
)

// BetaPrior is the Beta(a, a) mixing prior of the anytime test on the
// discordant tasks' win rate: uniform. Priors from 0.25 to 4 were tried on
// the simulation's ±20-point setting; the uniform one had the most power.
const BetaPrior = 1.0

// DefaultFutilityBeta is the chance, at most, that a challenger truly at
// the stated difference is stopped as futile (a loss of power, never a
// false winner: futility stops only ever keep a difference from being shown).
const DefaultFutilityBeta = stoprule.DefaultFutilityBeta

// Stopping is the design's stopping rule as the analysis reads it.
type Stopping struct {
	Method SequentialMethod `json:"method"`
	// Looks are the planned information fractions (shares of the pair's
	// planned paired tasks) of a group-sequential design, increasing and
	// ending at 1. Empty: a look at every check (every block).
	Looks    []float64 `json:"looks,omitempty"`
	Spending Spending  `json:"spending,omitempty"`
	// Alpha is the family-wise level; each of the K monitored comparisons
	// gets Alpha/K.
	Alpha float64 `json:"alpha"`
	// Futility is the stated difference (a share of tasks, or of the score
	// scale): a comparison whose paired difference is shown to be inside
	// ±Futility stops as futile. Zero: no futility stop.
	Futility float64 `json:"futility,omitempty"`
	// FutilityBeta bounds the chance of stopping a comparison that truly
	// differs by Futility as futile; zero means DefaultFutilityBeta.
	FutilityBeta float64 `json:"futility_beta,omitempty"`
	// Discordance is the power plan's pilot discordance ψ: under the stated
	// difference a discordant task favours the leader with chance
	// (ψ+Futility)/(2ψ), which sizes the group-sequential futility boundary
	// of pass kinds exactly (the anytime method bets against it with an
	// e-process), beside an agreement e-process on every task. Zero, or a
	// score kind, uses the futility e-process on the paired differences.
	Discordance float64 `json:"discordance,omitempty"`
}

// Validate checks the rule's fields; the errors name the field and the fix.
func (s Stopping) Validate() error {
	p := stoprule.Rule{Method: string(s.Method), Looks: s.Looks, Spending: string(s.Spending), Alpha: s.Alpha,
		Futility: s.Futility, FutilityBeta: s.FutilityBeta, Discordance: s.Discordance}.Check()
	if p == nil {
		return nil
	}
	return &FieldError{Field: p.Field, Problem: p.Problem, Fix: p.Fix}
}

// SpendAlpha is the alpha spent by information fraction t under the
// spending function, for a two-sided test at level alpha.
func SpendAlpha(sp Spending, alpha, t float64) float64 {
	t = math.Max(0, math.Min(1, t))
	if t == 0 {
		return 0
	}
	switch sp {
	case Pocock:
		return alpha * math.Log(1+(math.E-1)*t)
	default:
		z := distuv.UnitNormal.Quantile(1 - alpha/2)
		return math.Erfc(z / math.Sqrt(t) / math.Sqrt2)
	}
}

// CentredConcentration is the prior weight (pseudo-tasks) of the anytime
// test's mixture centred on the stated difference (CentredE). Measured by
// `rig bench stats --stopping` (±20 points on 100 tasks, ψ = 0.3, 2,000
// studies): power 0.83 at 2, 0.84 at 4, 0.87 at 8, 0.89 at 16, 0.90 at 32
// and at 1,000 (a point mass); 16 keeps nearly all of it while still
// betting on rates near the stated one.
const CentredConcentration = 16.0

// CentredE is the two-sided anytime e-value of b candidate-only and c
// baseline-only discordant tasks when the plan states the difference it is
// for: the even mixture of two Beta-binomial e-values whose priors are
// centred on a discordant task favouring the leader with chance theta1
// (one for each side), Beta(k·theta1, k·(1−theta1)) and its mirror, k =
// CentredConcentration. Any prior gives an e-process; one centred on the
// stated difference spends its bet where the design expects the effect,
// where the uniform prior of BetaBinomialE spreads it over every rate.
func CentredE(b, c int, theta1 float64) float64 {
	k := CentredConcentration
	return (betaBinomialE(b, c, k*theta1, k*(1-theta1)) + betaBinomialE(b, c, k*(1-theta1), k*theta1)) / 2
}

// betaBinomialE is B(p+b, q+c)/B(p, q)·2^(b+c): the Beta(p, q) mixture of
// the binomial likelihood of b wins and c losses over its value at one half.
func betaBinomialE(b, c int, p, q float64) float64 {
	lb := func(x, y float64) float64 {
		gx, _ := math.Lgamma(x)
		gy, _ := math.Lgamma(y)
		gxy, _ := math.Lgamma(x + y)
		return gx + gy - gxy
	}
	return math.Exp(lb(p+float64(b), q+float64(c)) - lb(p, q) + float64(b+c)*math.Ln2)
}

// BetaBinomialE is the two-sided mixture e-value of b candidate-only and c
// baseline-only discordant tasks against a fair coin: the Beta(a, a)
// mixture of the binomial likelihood over its value at one half,
// B(a+b, a+c)/B(a, a)·2^(b+c). Under no difference its running maximum
// reaches 1/alpha with probability at most alpha (Ville's inequality).
func BetaBinomialE(b, c int, a float64) float64 {
	lb := func(x, y float64) float64 {
		gx, _ := math.Lgamma(x)
		gy, _ := math.Lgamma(y)
		gxy, _ := math.Lgamma(x + y)
		return gx + gy - gxy
	}
	return math.Exp(lb(a+float64(b), a+float64(c)) - lb(a, a) + float64(b+c)*math.Ln2)
}

// ConfidenceSequence is a running interval for a paired difference that
// covers it at every task at once with probability Level.
type ConfidenceSequence struct {
	Lo    Num     `json:"lo"`
	Hi    Num     `json:"hi"`
	Level float64 `json:"level"`
}

// csPath is the predictable-plug-in empirical-Bernstein confidence sequence
// (Waudby-Smith & Ramdas 2023, Theorem 2) for the mean of paired
// differences d in [−1, 1], intersected over time; out[i] holds after
// i+1 tasks.
func csPath(d []float64, alpha float64) []ConfidenceSequence {
	out := make([]ConfidenceSequence, len(d))
	la := math.Log(2 / alpha)
	lo, hi := -1.0, 1.0
	sumX, sumDev2 := 0.0, 0.0 // of x = (d+1)/2 in [0,1]
	sumL, sumLX, sumPsi := 0.0, 0.0, 0.0
	muPrev, varPrev := 0.5, 0.25
	for i, di := range d {
		t := float64(i + 1)
		x := (di + 1) / 2
		lam := math.Min(math.Sqrt(2*la/(varPrev*t*math.Log(1+t))), 0.5)
		v := 4 * (x - muPrev) * (x - muPrev)
		sumL += lam
		sumLX += lam * x
		sumPsi += v * (-math.Log(1-lam) - lam) / 4
		c := sumLX / sumL
		w := (la + sumPsi) / sumL
		lo = math.Max(lo, 2*(c-w)-1)
		hi = math.Min(hi, 2*(c+w)-1)
		out[i] = ConfidenceSequence{Lo: Num(lo), Hi: Num(math.Max(lo, hi)), Level: 1 - alpha}
		sumX += x
		mu := (0.5 + sumX) / (t + 1)
		sumDev2 += (x - mu) * (x - mu)
		muPrev, varPrev = mu, (0.25+sumDev2)/(t+1)
	}
	return out
}

// bettingPath is a two-sided betting e-process for "the paired differences
// d in [−1,1] have mean zero": ∏(1 + λ_i d_i) with a predictable bet
// λ_i = clamp(mean/second moment so far, ±½) (growth-rate adaptive), a
// nonnegative martingale under the null. out[i] is its value after i+1.
func bettingPath(d []float64) []float64 {
	out := make([]float64, len(d))
	e, sum, sum2 := 1.0, 0.0, 0.0
	for i, di := range d {
		lam := 0.0
		if i > 0 {
			lam = math.Max(-0.5, math.Min(0.5, sum/(1+sum2)))
		}
		e *= 1 + lam*di
		out[i] = e
		sum += di
		sum2 += di * di
	}
	return out
}

// futilityPath is, for each side s = ±1, an e-process against "the mean
// paired difference is at least Δ in direction s": ∏(1 − λ_i(s·d_i − Δ)),
// with λ_i ∈ [0, ¾/(1−Δ)] predictable, a nonnegative supermartingale when
// the challenger truly differs by Δ or more that way. The bet is growth-rate
// adaptive (−mean/second moment of s·d − Δ) with the mean of d shrunk
// towards no difference, so it bets from the first task as if the
// challenger were futile. out[i] is the smaller of the two sides after i+1
// tasks: both must be large to call the comparison futile.
func futilityPath(d []float64, delta float64) []float64 {
	out := make([]float64, len(d))
	for i := range out {
		out[i] = math.Inf(1)
	}
	for _, s := range []float64{1, -1} {
		e, sum, sum2 := 1.0, 0.0, 0.0
		for i, di := range d {
			n := float64(i)
			mu := s * sum / (n + 1)
			m2 := (0.25 + sum2) / (n + 1)
			lam := math.Max(0, math.Min(0.75/(1-delta), (delta-mu)/(m2-2*delta*mu+delta*delta)))
			e *= 1 - lam*(s*di-delta)
			out[i] = math.Min(out[i], e)
			sum += di
			sum2 += di * di
		}
	}
	return out
}

// discordantFutilityPath is the futility e-process of pass kinds with a
// known stated difference: on the discordant tasks, for each side, the
// likelihood ratio of a plug-in win rate q (the wins so far with eight
// pseudo-tasks at one half, so it bets as if the pair were futile until the
// data say otherwise, kept on the futile side of the boundary) over the boundary
// win rate itself (theta for the candidate's side, 1−theta for the
// baseline's). For any true win rate on the far side of the boundary its
// expectation is at most 1, so it is a nonnegative supermartingale there.
// out[i] is the smaller side after i+1 tasks.
func discordantFutilityPath(sign []int, theta float64) []float64 {
	out := make([]float64, len(sign))
	up, down := 1.0, 1.0
	wins, m := 0, 0
	for i, x := range sign {
		if x != 0 {
			q := (float64(wins) + 8.0/2) / float64(m+8)
			qu, qd := math.Min(q, theta), math.Max(q, 1-theta)
			if x > 0 {
				up *= qu / theta
				down *= qd / (1 - theta)
				wins++
			} else {
				up *= (1 - qu) / (1 - theta)
				down *= (1 - qd) / theta
			}
			m++
		}
		out[i] = math.Min(up, down)
	}
	return out
}

// AgreementShare is the share of the futility beta that the agreement
// e-process (agreementPath) has beside the exact futility bound of a
// group-sequential pass kind with the pilot's discordance; the bound has
// the rest. Either may settle the pair as futile, so the two chances add
// up to beta. (The anytime method multiplies the two e-processes instead.)
const AgreementShare = 0.2

// agreementPath is an e-process against "a share of at least delta of the
// tasks are discordant": the product, over every paired task, of q/delta
// on a discordant task and (1−q)/(1−delta) on a concordant one, q the
// discordant share so far, (discordant + prior)/(tasks + 1), kept at or
// under delta. A prior of ½ (Krichevsky–Trofimov) bets on agreement
// soonest; 1 waits for more concordant tasks and so loses less on a pair
// that does differ on more than delta of its tasks, which matters where
// the product is multiplied into another e-process. A pair that differs by
// delta or more has at least that share of discordant tasks (a lead is
// made only on tasks where the arms differ), and for any discordance ψ' at
// or above delta a factor's expectation is (1−ψ')(1−q)/(1−delta) +
// ψ'q/delta ≤ 1, so it is a nonnegative supermartingale for every such
// pair, whatever its discordant tasks' split. It is how concordant tasks
// count: while the arms agree on more than 1−delta of the tasks it grows.
// out[i] is its value after i+1 tasks.
func agreementPath(sign []int, delta, prior float64) []float64 {
	out := make([]float64, len(sign))
	e, m := 1.0, 0
	for i, x := range sign {
		q := math.Min(delta, (float64(m)+prior)/float64(i+1))
		if x != 0 {
			e *= q / delta
			m++
		} else {
			e *= (1 - q) / (1 - delta)
		}
		out[i] = e
	}
	return out
}

// gsState carries the exact distribution of the sign-test walk S = wins −
// losses over the discordant tasks, conditional on their count: under no
// difference (f, each step a fair coin) restricted to paths that have not
// crossed the efficacy boundary, and, when futility is planned, under the
// stated difference (f1, a step up with chance theta) restricted to paths
// stopped by neither boundary. Futility never prunes f: it is non-binding,
// so ignoring it cannot raise the false-winner rate.
type gsState struct {
	m         int       // discordant tasks so far
	f         []float64 // f[s+m] = P0(S = s, not crossed)
	spent     float64   // null probability already spent on crossings
	theta     float64   // 0: no futility
	f1        []float64 // f1[s+m] = P1(S = s, not stopped)
	betaSpent float64   // probability under the stated difference spent on futility
}

func newGS(theta float64) *gsState { return &gsState{f: []float64{1}, theta: theta, f1: []float64{1}} }

func step(f []float64, up float64) []float64 {
	nf := make([]float64, len(f)+2)
	for i, p := range f {
		nf[i] += p * (1 - up)
		nf[i+2] += p * up
	}
	return nf
}

// advance walks the distributions on to m discordant tasks.
func (g *gsState) advance(m int) {
	for g.m < m {
		g.f = step(g.f, 0.5)
		if g.theta > 0 {
			g.f1 = step(g.f1, g.theta)
		}
		g.m++
	}
}

// mass is the probability in f of |S| ≥ lo and |S| ≤ hi at the current count.
func (g *gsState) mass(f []float64, lo, hi int) float64 {
	s := 0.0
	for i, p := range f {
		if a := abs(i - g.m); a >= lo && a <= hi {
			s += p
		}
	}
	return s
}

// tail is P0(|S| ≥ c, not crossed before).
func (g *gsState) tail(c int) float64 { return g.mass(g.f, c, g.m) }

// look spends up to cumAlpha (the cumulative alpha allowed by now) and, with
// futility, cumBeta under the stated difference. crit is the critical |S|:
// the smallest whose null crossing probability fits the increment, or m+1
// when no count can cross. fut is the largest |S| at or under which the
// comparison is futile (its probability under the stated difference fits
// the beta increment), or -1.
func (g *gsState) look(cumAlpha, cumBeta float64) (crit, fut int, spend float64) {
	target := cumAlpha - g.spent
	crit = g.m + 1
	h := g.byAbs(g.f)
	tl := 0.0
	for c := g.m; c >= 1; c-- {
		if tl += h[c]; tl > target+1e-15 {
			break
		}
		crit, spend = c, tl
	}
	g.spent += spend
	fut = -1
	for i := range g.f {
		if abs(i-g.m) >= crit {
			g.f[i] = 0
			if g.theta > 0 {
				g.f1[i] = 0
			}
		}
	}
	if g.theta > 0 {
		bt := cumBeta - g.betaSpent
		h1 := g.byAbs(g.f1)
		in, used := 0.0, 0.0
		for c := 0; c < crit; c++ {
			if in += h1[c]; in > bt+1e-15 {
				break
			}
			fut, used = c, in
		}
		g.betaSpent += used
		for i := range g.f1 {
			if abs(i-g.m) <= fut {
				g.f1[i] = 0
			}
		}
	}
	return crit, fut, spend
}

// byAbs sums f by |S|: out[a] = P(|S| = a) at the current count.
func (g *gsState) byAbs(f []float64) []float64 {
	out := make([]float64, g.m+1)
	for i, p := range f {
		out[abs(i-g.m)] += p
	}
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// SignTest is an exact group-sequential sign test on discordant tasks:
// two-sided, level Alpha, Lan–DeMets Spending at the looks' information
// fractions. With Theta > 0 it has a non-binding futility boundary that
// spends Beta under the stated difference in the O'Brien–Fleming shape
// whatever the alpha spending (little early: a futility stop on a few
// tasks is what costs power), where a
// discordant task favours the leader with chance Theta.
type SignTest struct {
	Spending Spending
	Alpha    float64
	Theta    float64
	Beta     float64
}

// GSBoundaries are a SignTest's boundaries for looks at discordant counts
// m (non-decreasing) and information fractions t: Crit[k] is the critical
// |wins − losses| at look k (m[k]+1 when no count can cross), Spent[k]
// the null probability of first crossing there, Futile[k] the largest
// |wins − losses| that is futile there (-1: none). The distributions are
// conditional on the counts, so the boundaries hold for any discordance.
type GSBoundaries struct {
	Crit   []int
	Spent  []float64
	Futile []int
	// BetaSpent is the probability, under the stated difference, of first
	// stopping as futile at each look.
	BetaSpent []float64
}

// Boundaries computes the test's boundaries at the looks.
func (st SignTest) Boundaries(m []int, t []float64) GSBoundaries {
	g := newGS(st.Theta)
	var b GSBoundaries
	for k := range m {
		g.advance(m[k])
		before := g.betaSpent
		c, fu, s := g.look(SpendAlpha(st.Spending, st.Alpha, t[k]), SpendAlpha(OBrienFleming, st.Beta, t[k]))
		b.BetaSpent = append(b.BetaSpent, g.betaSpent-before)
		b.Crit = append(b.Crit, c)
		b.Spent = append(b.Spent, s)
		b.Futile = append(b.Futile, fu)
	}
	return b
}

// StagewiseP is the stagewise-ordering p-value of stopping at the last
// look with walk value s (wins − losses): the null probability of crossing
// at an earlier look, plus that of reaching this look uncrossed with
// |S| ≥ |s|. Futility does not enter: it is non-binding.
func (st SignTest) StagewiseP(m []int, t []float64, s int) float64 {
	g := newGS(0)
	for k := range m {
		g.advance(m[k])
		if k == len(m)-1 {
			return math.Min(1, g.spent+g.tail(abs(s)))
		}
		g.look(SpendAlpha(st.Spending, st.Alpha, t[k]), 0)
	}
	return 1
}

// stagewiseTail is the probability, when each discordant task favours the
// candidate with chance theta, of an outcome at or beyond (k, s) in the
// stagewise ordering, upward or downward: a first crossing of that side's
// boundary at one of the looks before the last, or reaching the last look
// (m[len(m)-1] discordant tasks) uncrossed with S at or beyond s. crit are
// the critical |S| of the looks before the last (len(m)-1 of them).
func stagewiseTail(m, crit []int, s int, theta float64, up bool) float64 {
	f, cur := []float64{1}, 0 // f[i] = P(S = i − cur, not crossed)
	total := 0.0
	for k := range m {
		for ; cur < m[k]; cur++ {
			f = step(f, theta)
		}
		if k == len(m)-1 {
			for i, p := range f {
				if v := i - cur; (up && v >= s) || (!up && v <= s) {
					total += p
				}
			}
			return total
		}
		for i, p := range f {
			if v := i - cur; abs(v) >= crit[k] {
				if (up && v > 0) || (!up && v < 0) {
					total += p
				}
				f[i] = 0
			}
		}
	}
	return total
}

// StagewiseCI is the exact two-sided interval, at level 1 − Alpha, for the
// chance theta that a discordant task favours the candidate, having stopped
// at the last of the looks m (discordant tasks at each look; crit the
// critical |S| of the looks before it, as Boundaries gives them) with walk
// value s: the thetas under which the observed outcome is not in either
// stagewise tail of probability Alpha/2. At theta = 1/2 each tail is half
// of StagewiseP, so the interval excludes 1/2 exactly when the p-value is
// at most Alpha. Futility does not enter: it is non-binding.
func (st SignTest) StagewiseCI(m, crit []int, s int) (lo, hi float64) {
	half := st.Alpha / 2
	// The upward tail grows with theta and the downward one shrinks.
	solve := func(up bool) float64 {
		a, b := 0.0, 1.0
		for range 60 {
			mid := (a + b) / 2
			t := stagewiseTail(m, crit, s, mid, up)
			if (t < half) == up {
				a = mid
			} else {
				b = mid
			}
		}
		return (a + b) / 2
	}
	lo, hi = 0, 1
	if stagewiseTail(m, crit, s, 0, true) < half {
		lo = solve(true)
	}
	if stagewiseTail(m, crit, s, 1, false) < half {
		hi = solve(false)
	}
	return lo, hi
}

// PairedTask is one task both arms of a monitored comparison have
// finished: each arm's task value (repeats averaged, as in the analysis).
type PairedTask struct {
	Task      string  `json:"task"`
	Candidate float64 `json:"candidate"`
	Baseline  float64 `json:"baseline"`
}

// MonitoredPair is one monitored comparison as the runner has it so far.
type MonitoredPair struct {
	Pair    Pair    `json:"pair"`
	JobKind string  `json:"job_kind"`
	Measure Measure `json:"measure"`
	// Gate is the pass threshold on a task value (pass kinds; 0.5 if zero).
	Gate float64 `json:"gate"`
	// Planned is the pair's paired tasks in the full plan (information 1).
	Planned int `json:"planned"`
	// Tasks are the paired tasks in the order they completed.
	Tasks []PairedTask `json:"tasks"`
	// Checks is how many of Tasks were complete at each check the runner
	// made (one per block end), oldest first; the last is len(Tasks).
	Checks []int `json:"checks"`
	// Final says the plan has run out for this pair though fewer than
	// Planned tasks completed (trials that never produced a result): the
	// current check is its last look and spends whatever alpha is left.
	Final bool `json:"final,omitempty"`
}

// MonitorState is everything Monitor reads: the rule and the monitored
// comparisons. Monitor keeps no memory between calls; the runner passes the
// whole history each time, so a resumed execution gets the same answer.
type MonitorState struct {
	Stopping Stopping        `json:"stopping"`
	Pairs    []MonitoredPair `json:"pairs"`
}

// PairStatus is where a monitored comparison stands.
type PairStatus string

const (
	StatusContinue PairStatus = "continue"
	// StatusCrossed: the efficacy boundary was crossed; Direction says which arm leads.
	StatusCrossed PairStatus = "crossed"
	// StatusFutile: the difference is shown to be inside the stated one.
	StatusFutile PairStatus = "futile"
)

// LookPoint is one check of a comparison's path, for the report's figure.
type LookPoint struct {
	Check int `json:"check"` // 0-based index into Checks
	Tasks int `json:"tasks"`
	// Fraction is Tasks/Planned.
	Fraction float64 `json:"fraction"`
	// Look is false for a group-sequential check that was not a planned look.
	Look bool `json:"look"`
	// Statistic is the e-value (anytime) or wins − losses over the
	// discordant tasks (group-sequential); Boundary is what it must reach
	// (1/alpha_K, or the critical |wins − losses|; absent when no count can).
	Statistic  float64 `json:"statistic"`
	Boundary   Num     `json:"boundary"`
	Discordant int     `json:"discordant"`
	// FutilityE is the smaller futility e-value on the whole paired sample;
	// it must reach 1/FutilityBeta.
	FutilityE Num `json:"futility_e,omitempty"`
	// AgreementE is the agreement e-value of a group-sequential pass kind
	// with the pilot's discordance, beside FutilityBound: concordant tasks
	// count as evidence of no difference. It must reach
	// 1/(FutilityBeta·AgreementShare).
	AgreementE Num `json:"agreement_e,omitempty"`
	// FutilityBound is the group-sequential futility boundary: a look with
	// |wins − losses| at or under it is futile (absent when none).
	FutilityBound Num                `json:"futility_bound,omitempty"`
	CS            ConfidenceSequence `json:"cs"`
	// Status and P are the pair's as of this check: Monitor on the checks
	// up to here answers the same, so one call gives a whole path.
	Status PairStatus `json:"status"`
	P      Num        `json:"p"`
}

// PairLook is one monitored comparison at the current check.
type PairLook struct {
	Pair    Pair       `json:"pair"`
	JobKind string     `json:"job_kind"`
	Status  PairStatus `json:"status"`
	// Direction is "candidate" or "baseline": who leads, for a crossed pair.
	Direction string `json:"direction,omitempty"`
	// StoppedAt is the check at which the pair first crossed or was futile
	// (-1 while it continues).
	StoppedAt     int `json:"stopped_at"`
	Tasks         int `json:"tasks"`
	CandidateOnly int `json:"candidate_only"`
	BaselineOnly  int `json:"baseline_only"`
	// Alpha is the pair's share of the family's alpha (alpha/K).
	Alpha float64 `json:"alpha"`
	// P is the sequential p-value, valid at this stopping time: 1/max E
	// (anytime), or the stagewise-ordering p at the crossing or at the end
	// of the plan (group-sequential; 1 at an interim look the pair has not
	// crossed). Holm over these across the family is what a decision uses.
	P Num `json:"p"`
	// CS is the confidence sequence for the paired difference (candidate −
	// baseline, mean per task) at level 1 − Alpha, valid at any time.
	CS ConfidenceSequence `json:"cs"`
	// Stagewise, for a group-sequential pass kind once its p is set (at a
	// crossing or at the end of its plan), is the exact interval for the
	// paired difference at level 1 − Alpha by the test's own stagewise
	// ordering (SignTest.StagewiseCI), conditional on the discordant tasks
	// at that look. Unlike the confidence sequence, it excludes 0 exactly
	// when P ≤ Alpha, so the interval and the test say the same.
	Stagewise *StagewiseInterval `json:"stagewise,omitempty"`
	Path      []LookPoint        `json:"path"`
}

// StagewiseInterval is a group-sequential pair's exact interval for its
// paired difference, and the look it holds at.
type StagewiseInterval struct {
	Lo    Num     `json:"lo"`
	Hi    Num     `json:"hi"`
	Level float64 `json:"level"`
	// Tasks and Discordant are the paired and discordant tasks at the look.
	Tasks      int `json:"tasks"`
	Discordant int `json:"discordant"`
}

// Look is Monitor's answer at the current check.
type Look struct {
	Check int `json:"check"`
	// Stop is true when every monitored comparison crossed its efficacy
	// boundary or was shown futile before the plan ran out.
	Stop bool `json:"stop"`
	// End is true when every comparison has all its planned tasks.
	End    bool       `json:"end"`
	Reason string     `json:"reason"`
	Pairs  []PairLook `json:"pairs"`
	// HolmP are the Holm-adjusted P of Pairs, in order.
	HolmP []float64 `json:"holm_p"`
}

// Monitor judges the current check (the last of each pair's Checks): every
// monitored comparison's statistics, boundaries and status, and whether
// the execution may stop. It is pure and keeps no state.
func Monitor(st MonitorState) (Look, error) {
	s := st.Stopping
	if err := s.Validate(); err != nil {
		return Look{}, err
	}
	if len(st.Pairs) == 0 {
		return Look{}, &FieldError{Field: "pairs", Problem: "no monitored comparison", Fix: "a stopping rule monitors the pairs the decision rule names; name at least one"}
	}
	if s.FutilityBeta == 0 {
		s.FutilityBeta = DefaultFutilityBeta
	}
	alphaK := s.Alpha / float64(len(st.Pairs))
	var look Look
	look.Check = -1
	allDone, allEnd := true, true
	for i, mp := range st.Pairs {
		if err := mp.validate(fmt.Sprintf("pairs[%d]", i)); err != nil {
			return Look{}, err
		}
		pl := monitorPair(s, alphaK, mp)
		look.Pairs = append(look.Pairs, pl)
		look.Check = max(look.Check, len(mp.Checks)-1)
		allDone = allDone && pl.Status != StatusContinue
		allEnd = allEnd && (pl.Tasks == mp.Planned || mp.Final)
	}
	ps := make([]float64, len(look.Pairs))
	for i, p := range look.Pairs {
		ps[i] = float64(p.P)
	}
	look.HolmP = Holm(ps)
	look.End = allEnd
	switch {
	case allEnd:
		look.Reason = "the plan ran to its end"
	case allDone:
		look.Stop = true
		look.Reason = fmt.Sprintf("every monitored comparison is settled at check %d", look.Check+1) // counted from 1, as every line that shows a check does
	default:
		var open []string
		for _, p := range look.Pairs {
			if p.Status == StatusContinue {
				open = append(open, p.JobKind+": "+p.Pair.String())
			}
		}
		look.Reason = fmt.Sprintf("still open: %v", open)
	}
	return look, nil
}

func (mp MonitoredPair) validate(f string) error {
	switch {
	case mp.Measure != MeasurePass && mp.Measure != MeasureScore:
		return &FieldError{Field: f + ".measure", Problem: fmt.Sprintf("%q is not a measure", mp.Measure), Fix: `use "pass" or "score"`}
	case mp.Planned < 1:
		return &FieldError{Field: f + ".planned", Problem: fmt.Sprintf("%d", mp.Planned), Fix: "the pair's paired tasks in the plan, 1 or more"}
	case len(mp.Tasks) > mp.Planned:
		return &FieldError{Field: f + ".tasks", Problem: fmt.Sprintf("%d tasks, more than the %d planned", len(mp.Tasks), mp.Planned), Fix: "count each paired task once"}
	case len(mp.Checks) == 0 || mp.Checks[len(mp.Checks)-1] != len(mp.Tasks):
		return &FieldError{Field: f + ".checks", Problem: "the last check does not hold every task", Fix: "append len(tasks) as the current check"}
	}
	for k, c := range mp.Checks {
		if c < 0 || (k > 0 && c < mp.Checks[k-1]) {
			return &FieldError{Field: fmt.Sprintf("%s.checks[%d]", f, k), Problem: fmt.Sprintf("%d is below the check before it", c), Fix: "checks count completed tasks and never go down"}
		}
	}
	for k, t := range mp.Tasks {
		if !(t.Candidate >= 0 && t.Candidate <= 1 && t.Baseline >= 0 && t.Baseline <= 1) {
			return &FieldError{Field: fmt.Sprintf("%s.tasks[%d]", f, k), Problem: "a task value is outside [0,1]", Fix: "pass each arm's task value (repeats averaged)"}
		}
	}
	return nil
}

// monitorPair walks one comparison's checks in order.
func monitorPair(s Stopping, alphaK float64, mp MonitoredPair) PairLook {
	d, sign := pairedDifferences(mp)
	n := len(d)
	cs := csPath(d, alphaK)
	fut := futilityEvidence(s, mp, d, sign)
	agree := agreementEvidence(s, mp, sign)
	eAt := anytimeEvidence(s, mp, d, sign)
	pl := PairLook{Pair: mp.Pair, JobKind: mp.JobKind, Status: StatusContinue, StoppedAt: -1, Alpha: alphaK, P: 1}
	wins := make([]int, n+1) // discordant counts over the first i tasks
	losses := make([]int, n+1)
	sumD := make([]float64, n+1)
	for i, x := range sign {
		wins[i+1], losses[i+1], sumD[i+1] = wins[i], losses[i], sumD[i]+d[i]
		switch x {
		case 1:
			wins[i+1]++
		case -1:
			losses[i+1]++
		}
	}
	gs := newGSLooks(s, alphaK, mp)
	for k, nt := range mp.Checks {
		pt := LookPoint{Check: k, Tasks: nt, Fraction: float64(nt) / float64(mp.Planned), Discordant: wins[nt] + losses[nt],
			Boundary: Num(math.NaN()), FutilityE: Num(math.NaN()), AgreementE: Num(math.NaN()), FutilityBound: Num(math.NaN()), CS: ConfidenceSequence{Lo: -1, Hi: 1, Level: 1 - alphaK}}
		if nt > 0 {
			pt.CS = cs[nt-1]
		}
		crossed, futile := false, false
		switch s.Method {
		case Anytime:
			pt.Look = true
			pt.Statistic, pt.Boundary = 1, Num(1/alphaK)
			if nt > 0 {
				pt.Statistic = eAt[nt-1]
				maxE := maxUpTo(eAt, nt)
				// 1/max E is valid at any stopping time, so it keeps
				// improving after a crossing too.
				pl.P = Num(math.Min(1, 1/maxE))
				crossed = maxE >= 1/alphaK
			}
		case GroupSequential:
			crossed, futile = gs.check(&pl, &pt, k, wins[nt], losses[nt])
		}
		if fut != nil && nt > 0 {
			pt.FutilityE = Num(fut[nt-1])
			futile = maxUpTo(fut, nt) >= 1/s.FutilityBeta
		}
		if agree != nil && nt > 0 {
			pt.AgreementE = Num(agree[nt-1])
			futile = futile || maxUpTo(agree, nt) >= 1/(s.FutilityBeta*AgreementShare)
		}
		if crossed && pl.Status != StatusCrossed {
			pl.Status, pl.StoppedAt, pl.Direction = StatusCrossed, k, "candidate"
			if sumD[nt] < 0 {
				pl.Direction = "baseline"
			}
		}
		if pl.Status == StatusContinue && pt.Look && futile {
			pl.Status, pl.StoppedAt = StatusFutile, k
		}
		pt.Status, pt.P = pl.Status, pl.P
		pl.Path = append(pl.Path, pt)
	}
	pl.Tasks = n
	pl.CandidateOnly, pl.BaselineOnly = wins[n], losses[n]
	pl.CS = ConfidenceSequence{Lo: -1, Hi: 1, Level: 1 - alphaK}
	if n > 0 {
		pl.CS = cs[n-1]
	}
	return pl
}

// pairedDifferences is the pair's difference on each task (on a pass
// measure, the two passes at the gate subtracted) and its sign: +1 where
// only the candidate did better, −1 only the baseline, 0 concordant.
func pairedDifferences(mp MonitoredPair) ([]float64, []int) {
	gate := mp.Gate
	if gate == 0 {
		gate = 0.5
	}
	d := make([]float64, len(mp.Tasks))
	sign := make([]int, len(mp.Tasks))
	for i, t := range mp.Tasks {
		if mp.Measure == MeasurePass {
			c, b := b2f(t.Candidate >= gate), b2f(t.Baseline >= gate)
			d[i] = c - b
		} else {
			d[i] = t.Candidate - t.Baseline
		}
		switch {
		case d[i] > 0:
			sign[i] = 1
		case d[i] < 0:
			sign[i] = -1
		}
	}
	return d, sign
}

// futilityEvidence is the futility e-process after each task, on the whole
// paired sample, nil where the rule has no futility or the
// group-sequential test's own exact futility bound decides (a pass kind
// with the plan's discordance, beside agreementEvidence). An anytime pass
// kind with it multiplies the agreement e-process into the discordant
// tasks' one: both are supermartingales for a pair at or past the stated
// difference (the first for its discordance, the second for its
// discordant tasks' split), so their product is one. Score kinds, and pass
// kinds without it, bet on the paired differences, in which a concordant
// task is a zero.
func futilityEvidence(s Stopping, mp MonitoredPair, d []float64, sign []int) []float64 {
	switch {
	case s.Futility == 0 || (s.Method == GroupSequential && mp.Measure == MeasurePass && s.Discordance > 0):
		return nil
	case mp.Measure == MeasurePass && s.Discordance > 0:
		e := discordantFutilityPath(sign, (s.Discordance+s.Futility)/(2*s.Discordance))
		for i, a := range agreementPath(sign, s.Futility, 1) {
			e[i] *= a
		}
		return e
	default:
		return futilityPath(d, s.Futility)
	}
}

// agreementEvidence is the agreement e-process after each task beside the
// exact futility bound of a group-sequential pass kind with the plan's
// discordance, which reads only the discordant tasks and so could never
// settle a pair whose arms agree on every task; nil otherwise. It stands
// alone, so it bets soon. It must reach 1/(beta·AgreementShare).
func agreementEvidence(s Stopping, mp MonitoredPair, sign []int) []float64 {
	if s.Futility == 0 || s.Method != GroupSequential || mp.Measure != MeasurePass || s.Discordance == 0 {
		return nil
	}
	return agreementPath(sign, s.Futility, 0.5)
}

// anytimeEvidence is the anytime e-process after each task, nil for a
// group-sequential rule. With the plan's discordance and stated difference,
// a discordant task favours the leader with chance theta1 there, and the
// mixture is centred on it.
func anytimeEvidence(s Stopping, mp MonitoredPair, d []float64, sign []int) []float64 {
	if s.Method != Anytime {
		return nil
	}
	if mp.Measure != MeasurePass {
		return bettingPath(d)
	}
	theta1 := 0.0
	if s.Discordance > 0 && s.Futility > 0 && s.Futility <= s.Discordance {
		theta1 = (s.Discordance + s.Futility) / (2 * s.Discordance)
	}
	eAt := make([]float64, len(sign))
	b, c := 0, 0
	for i, x := range sign {
		switch x {
		case 1:
			b++
		case -1:
			c++
		}
		if theta1 > 0.5 && theta1 < 1 {
			eAt[i] = CentredE(b, c, theta1)
		} else {
			eAt[i] = BetaBinomialE(b, c, BetaPrior)
		}
	}
	return eAt
}

// gsLooks is a group-sequential pair's state across its checks: which
// looks were taken, at how many discordant tasks and with what critical
// value, and the exact recursion over the sign test's paths.
type gsLooks struct {
	s      Stopping
	st     SignTest
	g      *gsState
	mp     MonitoredPair
	alphaK float64

	lookM, lookCrit []int // the looks taken so far: discordant tasks and critical |S|
	nextLook        int
	lastLookTasks   int
	finalDone       bool
}

func newGSLooks(s Stopping, alphaK float64, mp MonitoredPair) *gsLooks {
	// Group-sequential futility is exact for pass kinds when the plan gives
	// the discordance, on the discordant tasks, with beta less the
	// agreement e-process's share; otherwise the futility e-process decides.
	theta, beta := 0.0, s.FutilityBeta
	if s.Method == GroupSequential && mp.Measure == MeasurePass && s.Futility > 0 && s.Discordance > 0 {
		theta, beta = (s.Discordance+s.Futility)/(2*s.Discordance), s.FutilityBeta*(1-AgreementShare)
	}
	return &gsLooks{s: s, st: SignTest{Spending: s.Spending, Alpha: alphaK, Theta: theta, Beta: beta}, g: newGS(theta), mp: mp, alphaK: alphaK}
}

// check decides whether check k (pt) is a look and, if it is, whether the
// sign statistic crossed its boundary or fell within the futility bound;
// at a crossing or the plan's end it sets the pair's stagewise p and, on a
// pass kind, its stagewise-exact interval.
func (l *gsLooks) check(pl *PairLook, pt *LookPoint, k, wins, losses int) (crossed, futile bool) {
	nt, mp := pt.Tasks, l.mp
	// The end of the pair's plan is one look, taken once, that spends what
	// is left; other looks need new tasks.
	final := !l.finalDone && (nt == mp.Planned || (mp.Final && k == len(mp.Checks)-1))
	if len(l.s.Looks) == 0 {
		pt.Look = nt > l.lastLookTasks
	} else {
		planned := false
		for l.nextLook < len(l.s.Looks) && pt.Fraction >= l.s.Looks[l.nextLook]-1e-12 {
			l.nextLook++
			planned = true
		}
		pt.Look = planned && nt > l.lastLookTasks
	}
	pt.Look = pt.Look || final
	l.finalDone = l.finalDone || final
	m, sv := wins+losses, wins-losses
	pt.Statistic = float64(sv)
	if !pt.Look || pl.Status == StatusCrossed {
		return false, false
	}
	l.lastLookTasks = nt
	frac := pt.Fraction
	if final {
		frac = 1 // the end spends whatever alpha is left
	}
	l.g.advance(m)
	before, tailObs := l.g.spent, l.g.tail(abs(sv))
	crit, fu, _ := l.g.look(SpendAlpha(l.st.Spending, l.st.Alpha, frac), SpendAlpha(OBrienFleming, l.st.Beta, frac))
	if crit <= m {
		pt.Boundary = Num(crit)
	}
	if fu >= 0 {
		pt.FutilityBound = Num(fu)
		futile = abs(sv) <= fu
	}
	// The stagewise p is valid where the design stops by itself: at a
	// crossing or at the end. A pair stopped uncrossed in between keeps
	// p = 1.
	l.lookM, l.lookCrit = append(l.lookM, m), append(l.lookCrit, crit)
	if crossed = abs(sv) >= crit; crossed || final {
		pl.P = Num(math.Min(1, before+tailObs))
		if mp.Measure == MeasurePass && nt > 0 {
			// Each task's difference is −1, 0 or +1: the mean is (m/n)(2θ − 1)
			// for the discordant tasks' chance θ.
			lo, hi := l.st.StagewiseCI(l.lookM, l.lookCrit[:len(l.lookCrit)-1], sv)
			scale := float64(m) / float64(nt)
			pl.Stagewise = &StagewiseInterval{Lo: Num(scale * (2*lo - 1)), Hi: Num(scale * (2*hi - 1)), Level: 1 - l.alphaK, Tasks: nt, Discordant: m}
		}
	}
	return crossed, futile
}

// maxUpTo is the running maximum of e over its first n values: an
// e-process that has once reached a bound has rejected for good.
func maxUpTo(e []float64, n int) float64 {
	return slices.Max(e[:n])
}
