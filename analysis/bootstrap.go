package analysis

import (
	"context"
	"fmt"
	"gonum.org/v1/gonum/stat"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"
)

// Interval is an interval with the method that produced it.
type Interval struct {
	Lo     Num            `json:"lo"`
	Hi     Num            `json:"hi"`
	Level  float64        `json:"level"`
	Method IntervalMethod `json:"method"`
	// EffectiveN is the effective number of tasks a design-effect method
	// used (between the tasks and the trials).
	EffectiveN float64 `json:"effective_n,omitempty"`
	// Note says why a fallback was taken, for the reader.
	Note string `json:"note,omitempty"`
}

// chunk is the number of resamples one work unit draws. Each chunk seeds its
// own generator from (seed, stream, chunk index), so results do not depend on
// how many goroutines ran.
const chunk = 250

// resampler holds a matrix of per-task values (n rows × k columns,
// row-major) and draws bootstrap resamples of its rows.
type resampler struct {
	x    []float64
	n, k int
}

// means returns, for each column a and resample b, the resampled column mean
// at out[a*B+b]. Work is split across GOMAXPROCS goroutines; each worker
// preallocates its index buffer and sums once, so a resample allocates nothing.
func (r resampler) means(ctx context.Context, B int, seed, stream uint64) ([]float64, error) {
	out := make([]float64, r.k*B)
	if r.n == 0 || B == 0 {
		return out, nil
	}
	nChunks := (B + chunk - 1) / chunk
	workers := min(runtime.GOMAXPROCS(0), nChunks)
	next := make(chan int, nChunks)
	for c := range nChunks {
		next <- c
	}
	close(next)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := make([]int32, r.n)
			sums := make([]float64, r.k)
			inv := 1 / float64(r.n)
			for c := range next {
				if ctx.Err() != nil {
					return
				}
				pcg := rand.NewPCG(seed^(stream*0x9e3779b97f4a7c15), uint64(c)+1)
				end := min((c+1)*chunk, B)
				for b := c * chunk; b < end; b++ {
					drawIndices(pcg, idx, r.n)
					clear(sums)
					for _, i := range idx {
						row := r.x[int(i)*r.k : int(i)*r.k+r.k]
						for a, v := range row {
							sums[a] += v
						}
					}
					for a, s := range sums {
						out[a*B+b] = s * inv
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// drawIndices fills idx with uniform draws from [0,n), two per 64-bit word by
// multiply-shift; the bias is below n/2^32, far under bootstrap noise.
func drawIndices(src *rand.PCG, idx []int32, n int) {
	un := uint64(n)
	i := 0
	for ; i+1 < len(idx); i += 2 {
		u := src.Uint64()
		idx[i] = int32((u & 0xffffffff) * un >> 32)
		idx[i+1] = int32((u >> 32) * un >> 32)
	}
	if i < len(idx) {
		idx[i] = int32((src.Uint64() & 0xffffffff) * un >> 32)
	}
}

// bootInterval is the bootstrap interval of the mean of xs, values in
// [lo, hi], unless xs has no spread: then every resample is the same point
// and the interval would have zero width, so the exact bound is returned.
func bootInterval(method IntervalMethod, level float64, xs, boot []float64, lo, hi float64) Interval {
	if len(xs) > 0 && noSpreadIn(xs) {
		l, h := noSpreadBounds(xs[0], lo, hi, len(xs), level)
		return Interval{Lo: Num(l), Hi: Num(h), Level: level, Method: NoSpread,
			Note: fmt.Sprintf("every one of the %d tasks has the value %.3g: a bootstrap would give a zero-width interval, so the bound is exact (no distribution assumed)", len(xs), xs[0])}
	}
	return interval(method, level, xs, boot)
}

// BootstrapInterval is the bootstrap interval (method, at level) of the
// mean of xs from resamples resamples drawn on seed and stream, computed as
// Analyse computes a score arm's but without its exact bound for a sample
// with no spread. It is exported so that `rig bench stats` (bench/stats)
// can measure the interval's coverage; Analyse does not call it.
func BootstrapInterval(ctx context.Context, xs []float64, resamples int, seed, stream uint64, method IntervalMethod, level float64) (Interval, error) {
	boot, err := resampler{x: xs, n: len(xs), k: 1}.means(ctx, resamples, seed, stream)
	if err != nil {
		return Interval{}, err
	}
	return interval(method, level, xs, boot), nil
}

// interval computes the bootstrap interval of the mean of xs from its
// bootstrap distribution boot (which it sorts in place).
func interval(method IntervalMethod, level float64, xs, boot []float64) Interval {
	iv := Interval{Level: level, Method: method, Lo: Num(math.NaN()), Hi: Num(math.NaN())}
	if len(xs) == 0 || len(boot) == 0 {
		return iv
	}
	sort.Float64s(boot)
	alpha := (1 - level) / 2
	if method == Percentile {
		iv.Lo, iv.Hi = Num(quantile(boot, alpha)), Num(quantile(boot, 1-alpha))
		return iv
	}
	theta := mean(xs)
	if boot[0] == boot[len(boot)-1] {
		// Reached only by a caller that did not check for a sample with
		// no spread first (interval's callers do): the resamples' point.
		iv.Lo, iv.Hi = Num(boot[0]), Num(boot[0])
		return iv
	}
	// Bias correction: the share of resamples below the estimate, ties half.
	lo := sort.SearchFloat64s(boot, theta)
	hi := lo
	for hi < len(boot) && boot[hi] == theta {
		hi++
	}
	share := (float64(lo) + 0.5*float64(hi-lo)) / float64(len(boot))
	share = math.Min(math.Max(share, 0.5/float64(len(boot))), 1-0.5/float64(len(boot)))
	z0 := distuv.UnitNormal.Quantile(share)
	// Acceleration from the jackknife; for a mean the leave-one-out values
	// are (S - x_i)/(n-1), so this is linear in n.
	n := float64(len(xs))
	s := theta * n
	var num, den float64
	for _, x := range xs {
		d := theta - (s-x)/(n-1)
		num += d * d * d
		den += d * d
	}
	acc := 0.0
	if den > 0 {
		acc = num / (6 * math.Pow(den, 1.5))
	}
	adj := func(p float64) float64 {
		z := distuv.UnitNormal.Quantile(p)
		return distuv.UnitNormal.CDF(z0 + (z0+z)/(1-acc*(z0+z)))
	}
	iv.Lo, iv.Hi = Num(quantile(boot, adj(alpha))), Num(quantile(boot, adj(1-alpha)))
	return iv
}

// mean is NaN for no values (gonum's 0/0).
func mean(xs []float64) float64 { return stat.Mean(xs, nil) }

// pBest returns each column's share of resamples in which it has the highest
// mean; a tie at the top splits the resample equally among the tied columns.
func pBest(means []float64, k, B int) []float64 {
	p := make([]float64, k)
	if B == 0 {
		return p
	}
	top := make([]int, 0, k)
	for b := range B {
		best := math.Inf(-1)
		top = top[:0]
		for a := range k {
			v := means[a*B+b]
			switch {
			case v > best:
				best = v
				top = append(top[:0], a)
			case v == best:
				top = append(top, a)
			}
		}
		w := 1 / float64(len(top))
		for _, a := range top {
			p[a] += w
		}
	}
	for a := range p {
		p[a] /= float64(B)
	}
	return p
}
