package analysis

import (
	"math"
	"testing"
)

// stagewiseDesign is a small group-sequential design whose every outcome
// can be enumerated: looks after 4, 8 and 12 discordant tasks.
func stagewiseDesign() (SignTest, []int, GSBoundaries) {
	st := SignTest{Spending: Pocock, Alpha: 0.05}
	m := []int{4, 8, 12}
	return st, m, st.Boundaries(m, []float64{1.0 / 3, 2.0 / 3, 1})
}

// outcome is where a path of discordant tasks stopped: the look and S.
type outcome struct{ look, s int }

// enumerate runs every one of the 2^12 paths through the design's
// boundaries and returns each outcome's probability when a discordant task
// favours the candidate with chance theta.
func enumerate(m []int, b GSBoundaries, theta float64) map[outcome]float64 {
	n := m[len(m)-1]
	out := map[outcome]float64{}
	for path := 0; path < 1<<n; path++ {
		// The whole path's probability; its outcome is where it first stops
		// (the rest of it is never seen, and its suffixes sum to one).
		p, s, k := 1.0, 0, 0
		var stop *outcome
		for i := 0; i < n; i++ {
			if path>>i&1 == 1 {
				s++
				p *= theta
			} else {
				s--
				p *= 1 - theta
			}
			if stop == nil && i+1 == m[k] {
				if k == len(m)-1 || abs(s) >= b.Crit[k] {
					stop = &outcome{k, s}
				} else {
					k++
				}
			}
		}
		out[*stop] += p
	}
	return out
}

// stagewiseRank places an outcome in the stagewise ordering, upward: a crossing of
// the upper boundary ranks above everything else, the earlier the higher;
// then the outcomes of the last look by S; then the crossings of the lower
// boundary, the later the higher. Within a look, by S.
func stagewiseRank(a outcome, last int) [3]int {
	switch {
	case a.look < last && a.s > 0:
		return [3]int{3, -a.look, a.s}
	case a.look == last:
		return [3]int{2, a.s, 0}
	default:
		return [3]int{1, a.look, a.s}
	}
}

func compareRank(x, y [3]int) int {
	for i := range x {
		if x[i] != y[i] {
			if x[i] < y[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// beyond is whether a is at or beyond o in the stagewise ordering, upward
// or downward.
func beyond(a, o outcome, last int, b GSBoundaries, up bool) bool {
	c := compareRank(stagewiseRank(a, last), stagewiseRank(o, last))
	if up {
		return c >= 0
	}
	return c <= 0
}

// The stagewise tails, computed by the dynamic programme, against every
// path enumerated, to 1e-9.
func TestStagewiseTailAgainstEnumeration(t *testing.T) {
	_, m, b := stagewiseDesign()
	for _, theta := range []float64{0.1, 0.3, 0.5, 0.72, 0.9} {
		dist := enumerate(m, b, theta)
		for o := range dist {
			for _, up := range []bool{true, false} {
				want := 0.0
				for a, p := range dist {
					if beyond(a, o, len(m)-1, b, up) {
						want += p
					}
				}
				got := stagewiseTail(m[:o.look+1], b.Crit[:o.look], o.s, theta, up)
				if math.Abs(got-want) > 1e-9 {
					t.Errorf("theta %.2f, stopped at look %d with S=%d, up %v: the programme says %.12f, the enumeration %.12f", theta, o.look, o.s, up, got, want)
				}
			}
		}
	}
}

// The interval excludes one half exactly when the stagewise p is at most
// alpha, at every outcome of the design: the report's interval and its
// test never disagree.
func TestStagewiseCIAgreesWithItsP(t *testing.T) {
	st, m, b := stagewiseDesign()
	t1 := []float64{1.0 / 3, 2.0 / 3, 1}
	checked := 0
	for o := range enumerate(m, b, 0.5) {
		p := st.StagewiseP(m[:o.look+1], t1[:o.look+1], o.s)
		lo, hi := st.StagewiseCI(m[:o.look+1], b.Crit[:o.look], o.s)
		if math.Abs(p-st.Alpha) < 1e-9 {
			continue // on the edge either answer is right
		}
		if excludes := lo > 0.5 || hi < 0.5; excludes != (p < st.Alpha) {
			t.Errorf("look %d, S=%d: p %.5f, interval [%.4f, %.4f]", o.look, o.s, p, lo, hi)
		}
		if lo > hi {
			t.Errorf("look %d, S=%d: an empty interval [%.4f, %.4f]", o.look, o.s, lo, hi)
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d outcomes checked", checked)
	}
}

// Exact coverage: for each true chance, the probability over every path
// that the interval misses it is at most alpha.
func TestStagewiseCICoverage(t *testing.T) {
	st, m, b := stagewiseDesign()
	for _, theta := range []float64{0.05, 0.2, 0.35, 0.5, 0.6, 0.8, 0.95} {
		miss := 0.0
		for o, p := range enumerate(m, b, theta) {
			lo, hi := st.StagewiseCI(m[:o.look+1], b.Crit[:o.look], o.s)
			if theta < lo-1e-12 || theta > hi+1e-12 {
				miss += p
			}
		}
		if miss > st.Alpha+1e-9 {
			t.Errorf("theta %.2f: the interval misses it with probability %.5f, over alpha %.2f", theta, miss, st.Alpha)
		}
	}
}
