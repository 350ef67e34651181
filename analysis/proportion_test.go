package analysis

import (
	"math"
	"testing"
)

// TestZeroOfThirty is the case the issue reported: 0 of 30 tasks passed
// must not give [0, 0]; Wilson's upper bound is 0.114 (Blaker's at the
// 93.5% floor, 0.087, lies inside it).
func TestZeroOfThirty(t *testing.T) {
	iv := RateInterval(make([]float64, 30), 30, 0.95)
	if iv.Method != WilsonBlaker || iv.Lo != 0 || math.Abs(float64(iv.Hi)-0.1135) > 0.0005 {
		t.Errorf("0 of 30: %+v, want wilson-blaker [0, 0.114]", iv)
	}
	// Three repeats each, all failed: the design effect cannot be
	// estimated, so the bound is exact over tasks (Clopper–Pearson's 0.116).
	iv = RateInterval(make([]float64, 30), 90, 0.95)
	if iv.Method != NoSpread || iv.Lo != 0 || math.Abs(float64(iv.Hi)-0.1157) > 0.0005 || iv.Note == "" {
		t.Errorf("0 of 30 × 3: %+v, want exact-no-spread [0, 0.116] with a note", iv)
	}
	// Both arms failing all 30 paired tasks: Tango gives ±3.84/33.84 (the
	// empty discordant cells add the arm interval of 0 of 30, the same); with
	// three repeats each the repeats say nothing about their correlation,
	// so the count stays at the 30 tasks, not the 90 trials.
	iv = DeltaInterval(make([]float64, 30), make([]float64, 30), 30, 0.95)
	if want := 3.8415 / 33.8415; iv.Method != TangoEdges || math.Abs(float64(iv.Hi)-want) > 1e-3 || math.Abs(float64(iv.Lo)+want) > 1e-3 {
		t.Errorf("0 vs 0 of 30: %+v, want tango-edges ±%.4f", iv, want)
	}
	iv = DeltaInterval(make([]float64, 30), make([]float64, 30), 90, 0.95)
	if want := 3.8415 / 33.8415; iv.Method != TangoEdgesDesignEffect || iv.EffectiveN != 30 || math.Abs(float64(iv.Hi)-want) > 1e-3 {
		t.Errorf("0 vs 0 of 30 × 3: %+v, want tango-edges-design-effect at 30 tasks, ±%.4f", iv, want)
	}
}

// TestWilsonReference checks Wilson's bounds against values computed by
// hand from the closed form (z = 1.959964): 7 of 20, 1 of 50, 20 of 20.
func TestWilsonReference(t *testing.T) {
	for _, c := range []struct {
		k, n   float64
		lo, hi float64
	}{{7, 20, 0.1812, 0.5671}, {1, 50, 0.0035, 0.1050}, {20, 20, 0.8389, 1}} {
		lo, hi := wilsonBounds(c.k/c.n, c.n, zFor(0.95))
		if math.Abs(lo-c.lo) > 5e-4 || math.Abs(hi-c.hi) > 5e-4 {
			t.Errorf("%v of %v: [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
}

// TestTangoScore checks the interval's defining property: at each bound the
// score statistic, with the constrained MLE found by brute-force search
// over the likelihood, equals ±z.
func TestTangoScore(t *testing.T) {
	z := zFor(0.95)
	for _, c := range [][3]float64{{3, 5, 30}, {7, 0, 20}, {0, 7, 20}, {10, 10, 20}, {2, 1, 200}, {0, 0, 30}} {
		b, cc, n := c[0], c[1], c[2]
		lo, hi := tangoBounds(b, cc, n, z)
		if !(lo <= (b-cc)/n && (b-cc)/n <= hi) || lo < -1 || hi > 1 {
			t.Fatalf("b %v c %v n %v: [%v, %v] does not hold the estimate", b, cc, n, lo, hi)
		}
		for _, bound := range []struct {
			delta, want float64
		}{{lo, z}, {hi, -z}} {
			if math.Abs(bound.delta) >= 1 {
				continue
			}
			q := bruteQ21(b, cc, n, bound.delta)
			got := (b - cc - n*bound.delta) / math.Sqrt(n*(2*q+bound.delta-bound.delta*bound.delta))
			if math.Abs(got-bound.want) > 1e-3 {
				t.Errorf("b %v c %v n %v: score at %.5f is %.4f, want %.4f", b, cc, n, bound.delta, got, bound.want)
			}
		}
	}
}

// bruteQ21 maximises the paired multinomial likelihood under a difference
// delta by a grid search, independently of the closed form.
func bruteQ21(b, c, n, delta float64) float64 {
	lo, hi := math.Max(0, -delta), (1-delta)/2
	best, arg := math.Inf(-1), lo
	for i := 0; i <= 200000; i++ {
		q := lo + (hi-lo)*float64(i)/200000
		l := 0.0
		if b > 0 {
			l += b * math.Log(q+delta)
		}
		if c > 0 {
			l += c * math.Log(q)
		}
		if m := n - b - c; m > 0 {
			l += m * math.Log(1-2*q-delta)
		}
		if l > best {
			best, arg = l, q
		}
	}
	return arg
}
