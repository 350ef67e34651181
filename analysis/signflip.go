package analysis

import (
	"context"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
)

// SignFlip is the result of a paired sign-flip permutation test.
type SignFlip struct {
	P float64 `json:"p"`
	// Exact is true when every sign assignment was enumerated; otherwise
	// Resamples random assignments were drawn and P = (1+hits)/(1+Resamples).
	Exact     bool `json:"exact"`
	Resamples int  `json:"resamples,omitempty"`
	NonZero   int  `json:"non_zero"`
}

// MaxExactSignFlip is the largest number of non-zero differences enumerated
// exactly (2^22 assignments, a few milliseconds with a Gray code).
const MaxExactSignFlip = 22

// SignFlipTest tests whether paired differences d are centred on zero, on the
// statistic |Σd|. Zero differences carry no sign and are dropped.
func SignFlipTest(ctx context.Context, d []float64, resamples int, seed uint64) (SignFlip, error) {
	var nz []float64
	for _, v := range d {
		if v != 0 {
			nz = append(nz, v)
		}
	}
	m := len(nz)
	r := SignFlip{P: 1, NonZero: m}
	if m == 0 {
		r.Exact = true
		return r, nil
	}
	obs := 0.0
	scale := 0.0
	for _, v := range nz {
		obs += v
		scale += math.Abs(v)
	}
	obs = math.Abs(obs)
	// Sums equal to the observed one in exact arithmetic may differ in the
	// last bits after another order of additions.
	thr := obs - 1e-9*scale
	if m <= MaxExactSignFlip {
		// Gray code: each step flips one sign, so each sum is O(1).
		cur := 0.0
		for _, v := range nz {
			cur += v
		}
		signs := make([]float64, m)
		for i := range signs {
			signs[i] = 1
		}
		hits := 0
		total := 1 << m
		for g := 0; g < total; g++ {
			if g > 0 {
				j := bits.TrailingZeros(uint(g))
				cur -= 2 * signs[j] * nz[j]
				signs[j] = -signs[j]
				if g&0xfffff == 0 && ctx.Err() != nil {
					return r, ctx.Err()
				}
			}
			if math.Abs(cur) >= thr {
				hits++
			}
		}
		r.Exact = true
		r.P = float64(hits) / float64(total)
		return r, nil
	}
	hits, err := signFlipHits(ctx, nz, thr, resamples, seed)
	if err != nil {
		return r, err
	}
	r.Resamples = resamples
	r.P = float64(1+hits) / float64(1+resamples)
	return r, nil
}

// signFlipHits counts random sign assignments whose |Σ| reaches thr, split
// into fixed chunks (each seeded from its index) across GOMAXPROCS goroutines,
// so the count does not depend on how many ran.
func signFlipHits(ctx context.Context, nz []float64, thr float64, resamples int, seed uint64) (int, error) {
	nChunks := (resamples + chunk - 1) / chunk
	counts := make([]int, nChunks)
	next := make(chan int, nChunks)
	for c := range nChunks {
		next <- c
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), nChunks) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if ctx.Err() != nil {
					return
				}
				src := rand.NewPCG(seed^0x5157, uint64(c)+1)
				hits := 0
				for range min(chunk, resamples-c*chunk) {
					s := 0.0
					var w uint64
					for j, v := range nz {
						if j&63 == 0 {
							w = src.Uint64()
						}
						// Branch-free ±v: the sign bit comes from w.
						s += math.Float64frombits(math.Float64bits(v) ^ (w&1)<<63)
						w >>= 1
					}
					if math.Abs(s) >= thr {
						hits++
					}
				}
				counts[c] = hits
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	total := 0
	for _, h := range counts {
		total += h
	}
	return total, nil
}
