package analysis

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mathext"
)

// The pass-rate intervals' coverage, by exact enumeration rather than
// simulation (docs/statistics.md, "Coverage, enumerated"). With one repeat a
// study of n tasks is a Binomial(n, p) count for an arm and a trinomial
// (first arm alone, second alone, agreeing) for a pair, so the chance that
// the interval holds the truth is a finite sum over the outcomes.

// coverageTasks are the task counts enumerated.
var coverageTasks = []int{20, 30, 60, 100, 200}

// rateTable is an arm-rate interval for every count of n.
type rateTable struct{ lo, hi []float64 }

func newRateTable(n int, bounds func(x, n float64) (float64, float64)) rateTable {
	t := rateTable{make([]float64, n+1), make([]float64, n+1)}
	for x := range t.lo {
		t.lo[x], t.hi[x] = bounds(float64(x), float64(n))
	}
	return t
}

func (t rateTable) coverage(p float64) float64 {
	pmf := binomPMFs(len(t.lo)-1, p, nil)
	s := 0.0
	for x, v := range pmf {
		if t.lo[x] <= p && p <= t.hi[x] {
			s += v
		}
	}
	return s
}

// lowest is the infimum of the coverage over every rate in [0, 1], and
// where it is approached. Between two consecutive bounds the counts that
// cover are a fixed run a..b, and P(a ≤ X ≤ b) rises then falls in p, so
// the infimum is a one-sided limit at a bound (or at 0 or 1): evaluating
// just either side of every bound finds it.
func (t rateTable) lowest() (float64, float64) {
	low, at := 1.0, 0.0
	try := func(p float64) {
		if p >= 0 && p <= 1 {
			if c := t.coverage(p); c < low {
				low, at = c, p
			}
		}
	}
	try(0)
	try(1)
	for x := range t.lo {
		for _, e := range []float64{t.lo[x], t.hi[x]} {
			try(e - 1e-10)
			try(e + 1e-10)
		}
	}
	return low, at
}

// windowMean is the coverage averaged over rates uniform on [s, t],
// integrated exactly: ∫ P(X = x) dp over an interval is a difference of
// regularized incomplete beta functions, divided by n + 1.
func (t rateTable) windowMean(s, u float64) float64 {
	n := len(t.lo) - 1
	sum := 0.0
	for x := range t.lo {
		a, b := math.Max(s, t.lo[x]), math.Min(u, t.hi[x])
		if b > a {
			al, be := float64(x+1), float64(n-x+1)
			sum += (mathext.RegIncBeta(al, be, b) - mathext.RegIncBeta(al, be, a)) / float64(n+1)
		}
	}
	return sum / (u - s)
}

// window is the ±0.01 neighbourhood of a centre, cut at 0 and 1.
func window(c float64) (float64, float64) {
	return math.Max(0, c-0.01), math.Min(1, c+0.01)
}

// floorEnvelope is, at a rate p, the least coverage any interval can have
// there while keeping the floor f: an interval whose bounds rise with the
// count covers p on a run of counts, and the run must hold at least f, so
// its probability is at least the smallest run probability that reaches f.
func floorEnvelope(n int, p, f float64) float64 {
	pmf := binomPMFs(n, p, nil)
	best, s, b := 2.0, 0.0, -1
	for a := 0; a <= n; a++ {
		for s < f && b < n {
			b++
			s += pmf[b]
		}
		if s < f {
			break
		}
		best = math.Min(best, s)
		s -= pmf[a]
	}
	return best
}

// rateWindowBar is, per task count, how far from 0 and 1 a window of ±0.01
// may average over 96.5% and still pass: inside it the count is too coarse
// for a window that narrow (at 20 tasks the counts are 0.05 apart) and the
// coverage swings with the count, Wilson's own as much as the new interval's
// (the table in docs/statistics.md). Within the first part of it no
// interval can do better, TestRateWindowUnattainableAtEnds shows.
var rateWindowBar = map[int]float64{20: 0.36, 30: 0.21, 60: 0.06, 100: 0.03, 200: 0.02}

// TestRateCoverageFloor enumerates the arm-rate interval's coverage at
// every true rate: its infimum at least the floor (93.5%) for every task
// count from 20 to 200, and, for 20, 30, 60, 100 and 200 tasks, every ±0.01
// window's average at least the floor and, away from
// the ends (rateWindowBar), at most 96.5%, and the average over all rates
// within 95% ± 1.5. Wilson's interval alone, the one used before, falls
// under the floor at every task count, which the enumeration must see.
func TestRateCoverageFloor(t *testing.T) {
	const level = 0.95
	floor := floorLevel(level)
	if math.Abs(floor-0.935) > 1e-12 {
		t.Fatalf("floor of a 95%% interval %.4f, want 0.935", floor)
	}
	wilson := func(x, n float64) (float64, float64) { return wilsonBounds(x/n, n, zFor(level)) }
	rate := func(x, n float64) (float64, float64) { return rateBounds(x, n, level) }
	var table strings.Builder
	fmt.Fprintf(&table, "tasks | Wilson: lowest, windows, mean | Wilson ∪ Blaker: lowest (at), windows, mean\n")
	for _, n := range coverageTasks {
		old, cur := newRateTable(n, wilson), newRateTable(n, rate)
		oldLow, _ := old.lowest()
		low, at := cur.lowest()
		if oldLow >= floor {
			t.Errorf("%d tasks: Wilson's lowest coverage %.4f, yet Wilson is known to dip under %.3f", n, oldLow, floor)
		}
		if low < floor-1e-9 {
			t.Errorf("%d tasks: lowest coverage %.4f at rate %.4f, under the floor %.3f", n, low, at, floor)
		}
		var stats [2][2]float64 // per table: lowest and highest window
		for i, tb := range []rateTable{old, cur} {
			stats[i] = [2]float64{1, 0}
			for c := 0.0; c <= 1+1e-9; c += 0.0025 {
				s, u := window(c)
				w := tb.windowMean(s, u)
				stats[i][0], stats[i][1] = math.Min(stats[i][0], w), math.Max(stats[i][1], w)
				if i == 0 {
					continue
				}
				if w < floor-1e-9 {
					t.Errorf("%d tasks: window around %.4f averages %.4f, under the floor", n, c, w)
				}
				if d := math.Min(c, 1-c); d >= rateWindowBar[n] && w > 0.965 {
					t.Errorf("%d tasks: window around %.4f averages %.4f, over 0.965", n, c, w)
				}
			}
		}
		oldMean, mean := old.windowMean(0, 1), cur.windowMean(0, 1)
		if math.Abs(mean-0.95) > 0.015 {
			t.Errorf("%d tasks: coverage averaged over all rates %.4f, want 0.95 ± 0.015", n, mean)
		}
		fmt.Fprintf(&table, "%5d | %.4f, %.4f–%.4f, %.4f | %.4f (%.4f), %.4f–%.4f, %.4f\n",
			n, oldLow, stats[0][0], stats[0][1], oldMean, low, at, stats[1][0], stats[1][1], mean)
	}
	t.Log("\n" + table.String())
	// The floor at every task count from 20 to 200, not only those above.
	for n := 20; n <= 200; n++ {
		if low, at := newRateTable(n, rate).lowest(); low < floor-1e-9 {
			t.Errorf("%d tasks: lowest coverage %.4f at rate %.4f, under the floor %.3f", n, low, at, floor)
		}
	}
}

// TestRateWindowUnattainableAtEnds is why the window bar is not asked of the
// ends: a window of ±0.01 at 0 (or 1) averages over 96.5% for every
// interval that keeps the floor, at every task count enumerated. Near 0 the
// counts that cover a rate must carry at least the floor, and the smallest
// such run of counts already carries more (floorEnvelope); its average over
// the window bounds every interval's. The log gives, per task count, how far
// in from the ends that bound stays over 96.5%.
func TestRateWindowUnattainableAtEnds(t *testing.T) {
	const steps = 400
	for _, n := range coverageTasks {
		// mean is the envelope's average over [s, u], by the midpoint rule.
		mean := func(s, u float64) float64 {
			sum := 0.0
			for i := range steps {
				sum += floorEnvelope(n, s+(u-s)*(float64(i)+0.5)/steps, 0.935)
			}
			return sum / steps
		}
		at0 := mean(window(0))
		if at0 <= 0.965 {
			t.Errorf("%d tasks: the least window average at 0 is %.4f, which some interval might reach", n, at0)
		}
		zone := 0.0
		for c := 0.0; c <= 0.2; c += 0.0025 {
			if mean(window(c)) > 0.965 {
				zone = c
			}
		}
		t.Logf("%d tasks: any interval keeping 93.5%% averages at least %.4f over [0, 0.01]; windows over 96.5%% are forced up to %.4f from either end", n, at0, zone)
	}
}

// pairTable is a paired-difference interval for every table of n tasks,
// indexed by the discordant count k and the first arm's share b of it.
type pairTable struct {
	n      int
	lo, hi [][]float64
}

func newPairTable(n int, bounds func(b, c, n float64) (float64, float64)) pairTable {
	t := pairTable{n: n, lo: make([][]float64, n+1), hi: make([][]float64, n+1)}
	for k := 0; k <= n; k++ {
		t.lo[k], t.hi[k] = make([]float64, k+1), make([]float64, k+1)
		for b := 0; b <= k; b++ {
			t.lo[k][b], t.hi[k][b] = bounds(float64(b), float64(k-b), float64(n))
		}
	}
	return t
}

// coverage is the chance the interval holds Δ when a task is discordant
// with chance psi and Δ = P(first alone) − P(second alone): the discordant
// count is Binomial(n, psi) and its split Binomial(k, (1 + Δ/psi)/2).
func (t pairTable) coverage(psi, delta float64) float64 {
	kk := binomPMFs(t.n, psi, nil)
	theta := clampRange((1+delta/psi)/2, 0, 1)
	s := 0.0
	for k, pk := range kk {
		if pk < 1e-16 {
			continue
		}
		for b, v := range binomPMFs(k, theta, nil) {
			if t.lo[k][b] <= delta && delta <= t.hi[k][b] {
				s += pk * v
			}
		}
	}
	return s
}

// TestDeltaCoverageFloor enumerates the paired interval's coverage over a
// grid of the two discordant chances (discordance ψ = (i/40)², i = 1..40,
// so dense near 0 and reaching 1; the difference at 161 points across
// [−ψ, ψ], both ends included) for 20 to 200 tasks: nowhere under the floor
// (93.5%). Above it there is no bar: where few tasks can be discordant no
// interval symmetric in the arms comes near 95% (docs/statistics.md).
// Tango's interval alone, the one used before, falls under the floor.
func TestDeltaCoverageFloor(t *testing.T) {
	const level = 0.95
	floor := floorLevel(level)
	tango := func(b, c, n float64) (float64, float64) { return tangoBounds(b, c, n, zFor(level)) }
	edges := func(b, c, n float64) (float64, float64) { return deltaBounds(b, c, n, level) }
	for _, n := range coverageTasks {
		var lows [2]float64
		var where [2][2]float64
		for i, tb := range []pairTable{newPairTable(n, tango), newPairTable(n, edges)} {
			lows[i] = 1
			for a := 1; a <= 40; a++ {
				psi := math.Pow(float64(a)/40, 2)
				for j := 0; j <= 160; j++ {
					delta := psi * (float64(j)/80 - 1)
					if c := tb.coverage(psi, delta); c < lows[i] {
						lows[i], where[i] = c, [2]float64{psi, delta}
					}
				}
			}
		}
		t.Logf("%d tasks: lowest coverage on the grid: Tango %.4f (ψ %.4f, Δ %.4f), Tango widened on the edges %.4f (ψ %.4f, Δ %.4f)",
			n, lows[0], where[0][0], where[0][1], lows[1], where[1][0], where[1][1])
		if lows[1] < floor-1e-9 {
			t.Errorf("%d tasks: coverage %.4f at ψ %.4f, Δ %.4f, under the floor %.3f", n, lows[1], where[1][0], where[1][1], floor)
		}
		if lows[0] >= floor {
			t.Errorf("%d tasks: Tango's lowest coverage on the grid %.4f, yet it is known to dip under %.3f", n, lows[0], floor)
		}
	}
}

// TestBlakerBounds checks the exact interval against a brute-force scan of
// its own definition, written independently: the set of rates on a fine
// grid at which the count's two-sided Blaker p-value exceeds α.
func TestBlakerBounds(t *testing.T) {
	accept := func(k, m int, p float64) float64 {
		pmf := make([]float64, m+1)
		for j := range pmf {
			pmf[j] = binomPMF(j, m, p)
		}
		tailFrom := func(a, b int) float64 { // P(a ≤ X ≤ b)
			s := 0.0
			for j := a; j <= b; j++ {
				s += pmf[j]
			}
			return s
		}
		lower, upper := tailFrom(0, k), tailFrom(k, m)
		tail, best := math.Min(lower, upper), 0.0
		for y := 0; y <= m; y++ {
			opp := 0.0
			switch {
			case lower <= upper && y > k:
				opp = tailFrom(y, m)
			case lower > upper && y < k:
				opp = tailFrom(0, y)
			}
			if opp <= tail*(1+1e-7) {
				best = math.Max(best, opp)
			}
		}
		return math.Min(1, tail+best)
	}
	for _, c := range [][2]int{{0, 20}, {1, 20}, {3, 20}, {7, 20}, {10, 20}, {19, 20}, {2, 60}, {31, 60}} {
		k, m := c[0], c[1]
		est := float64(k) / float64(m)
		lo, hi := blakerBounds(float64(k), float64(m), 0.935, est, est)
		const steps = 5000
		wantLo, wantHi := 1.0, 0.0
		for i := 0; i <= steps; i++ {
			p := float64(i) / steps
			if accept(k, m, p) > 0.065 {
				wantLo, wantHi = math.Min(wantLo, p), math.Max(wantHi, p)
			}
		}
		if math.Abs(lo-wantLo) > 1.5/steps || math.Abs(hi-wantHi) > 1.5/steps {
			t.Errorf("%d of %d: Blaker 93.5%% [%.5f, %.5f], scan [%.5f, %.5f]", k, m, lo, hi, wantLo, wantHi)
		}
	}
	// Between whole counts the bounds move continuously and in order.
	a1, b1 := blakerBounds(3, 20, 0.935, 3.0/20, 3.0/20)
	a2, b2 := blakerBounds(3.5, 20.5, 0.935, 3.5/20.5, 3.5/20.5)
	a3, b3 := blakerBounds(4, 21, 0.935, 4.0/21, 4.0/21)
	if !(a1 < a2 && a2 < a3 && b1 < b2 && b2 < b3) {
		t.Errorf("3.5 of 20.5: [%.4f, %.4f], want between 3 of 20 [%.4f, %.4f] and 4 of 21 [%.4f, %.4f]", a2, b2, a1, b1, a3, b3)
	}
}
