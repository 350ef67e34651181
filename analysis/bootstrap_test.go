package analysis

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

func TestResamplerIndependentOfWorkers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, 300*3)
	for i := range x {
		x[i] = rng.Float64()
	}
	r := resampler{x: x, n: 300, k: 3}
	prev := runtime.GOMAXPROCS(1)
	one, err := r.means(context.Background(), 2000, 9, 1)
	runtime.GOMAXPROCS(4)
	four, err2 := r.means(context.Background(), 2000, 9, 1)
	runtime.GOMAXPROCS(prev)
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	if !slices.Equal(one, four) {
		t.Fatal("bootstrap depends on the number of goroutines")
	}
	// Each column's bootstrap means centre on its sample mean.
	for a := range 3 {
		var col []float64
		for i := range 300 {
			col = append(col, x[i*3+a])
		}
		if got, want := mean(one[a*2000:(a+1)*2000]), mean(col); math.Abs(got-want) > 0.005 {
			t.Errorf("column %d: bootstrap mean %v, sample mean %v", a, got, want)
		}
	}
}

func TestIntervals(t *testing.T) {
	// A strongly skewed sample: BCa must move the interval relative to the
	// percentile interval, and both must contain the sample mean.
	rng := rand.New(rand.NewPCG(3, 4))
	xs := make([]float64, 60)
	for i := range xs {
		xs[i] = math.Pow(rng.Float64(), 6)
	}
	boot, err := resampler{x: xs, n: len(xs), k: 1}.means(context.Background(), 10000, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	pc := interval(Percentile, 0.95, xs, slices.Clone(boot))
	bca := interval(BCa, 0.95, xs, slices.Clone(boot))
	m := mean(xs)
	for _, iv := range []Interval{pc, bca} {
		if !(float64(iv.Lo) < m && m < float64(iv.Hi)) {
			t.Errorf("%s interval [%v, %v] misses the mean %v", iv.Method, iv.Lo, iv.Hi, m)
		}
	}
	if pc.Lo == bca.Lo && pc.Hi == bca.Hi {
		t.Errorf("BCa equals percentile on a skewed sample: %+v", bca)
	}
	// Right skew: BCa shifts the interval up.
	if !(bca.Hi > pc.Hi) {
		t.Errorf("BCa upper %v not above percentile upper %v for right-skewed data", bca.Hi, pc.Hi)
	}
	flat := interval(BCa, 0.95, []float64{0.5, 0.5, 0.5}, []float64{0.5, 0.5, 0.5})
	if flat.Lo != 0.5 || flat.Hi != 0.5 {
		t.Errorf("constant sample gave %+v", flat)
	}
}

func TestPBestTies(t *testing.T) {
	tests := []struct {
		name  string
		means []float64 // k=3 columns × B=2 resamples, column-major
		want  []float64
	}{
		{name: "one clear winner", means: []float64{1, 1, 0, 0, 0, 0}, want: []float64{1, 0, 0}},
		{name: "three-way tie split", means: []float64{1, 1, 1, 1, 1, 1}, want: []float64{1. / 3, 1. / 3, 1. / 3}},
		{name: "tie in one resample", means: []float64{1, 0, 1, 1, 0, 0}, want: []float64{0.25, 0.75, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := pBest(tc.means, 3, 2)
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-12 {
					t.Fatalf("pBest = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestSignFlipMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	null := make([]float64, 40)
	shifted := make([]float64, 40)
	for i := range null {
		null[i] = rng.NormFloat64()
		shifted[i] = rng.NormFloat64() + 1
	}
	ctx := context.Background()
	a, err := SignFlipTest(ctx, null, 20000, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SignFlipTest(ctx, shifted, 20000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a.Exact || a.Resamples != 20000 || b.Exact {
		t.Fatalf("40 differences should use Monte Carlo: %+v", a)
	}
	if a.P < 0.01 {
		t.Errorf("null sample rejected: p %v", a.P)
	}
	if b.P > 0.001 {
		t.Errorf("shift of one sd over 40 tasks not detected: p %v", b.P)
	}
	if b.P < 1/20001. {
		t.Errorf("Monte Carlo p %v below its floor 1/(R+1)", b.P)
	}
}

func TestHolmStepAlpha(t *testing.T) {
	ps := []float64{0.004, 0.02, 0.011}
	adj := Holm(ps)
	// Holm rejects p_(i) iff every earlier p_(j) ≤ HolmStepAlpha(α, m, j).
	for i, p := range ps {
		rank := 1
		for _, q := range ps {
			if q < p {
				rank++
			}
		}
		stepwise := true
		for j := 1; j <= rank; j++ {
			sorted := slices.Sorted(slices.Values(ps))
			stepwise = stepwise && sorted[j-1] <= HolmStepAlpha(0.05, len(ps), j)
		}
		if (adj[i] <= 0.05) != stepwise {
			t.Errorf("p %v: adjusted %v disagrees with the step-down rule (%v)", p, adj[i], stepwise)
		}
	}
}
