package tasks

import (
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// Candidate generation for the near-duplicate lint: MinHash with banding
// (locality-sensitive hashing). Each text gets lintBands×lintRows MinHash
// values; two texts become a candidate pair when all lintRows values of at
// least one band agree. For two shingle sets of Jaccard s one MinHash value
// agrees with probability s, so
//
//	P(candidate) = 1 - (1 - s^r)^b,  r = 8 rows, b = 40 bands (320 hashes).
//
// At the lint threshold s = 0.9 that is 1 - 1.7e-10: a true pair is missed
// with probability 1.7e-10, and less above it (1.2e-19 at s = 0.95). Pairs
// below the threshold rarely get that far: 0.26% of pairs at s = 0.3 (about
// what tasks sharing a bank's boilerplate have), 14% at s = 0.5. Every
// candidate is then verified with the exact shingle Jaccard used before, so
// precision and the threshold's meaning are unchanged; only a miss is
// possible, at the probability above. The hash seeds are constants
// (lshSeeds), so the same bank always gives the same pairs.
const (
	lintBands = 40
	lintRows  = 8
)

// simPair is two indexes, i < j, and their exact Jaccard.
type simPair struct {
	i, j int
	s    float64
}

// sortedShingles is shingles as a sorted slice: the same set, cheaper to
// intersect and to hash.
func sortedShingles(ws []string, n int) []uint64 {
	if len(ws) == 0 {
		return nil
	}
	if len(ws) < n {
		return []uint64{hashWords(ws)}
	}
	out := make([]uint64, 0, len(ws)-n+1)
	for i := 0; i+n <= len(ws); i++ {
		out = append(out, hashWords(ws[i:i+n]))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// jaccardAtLeast returns the Jaccard of two sorted, duplicate-free slices
// (the value jaccard gives for the same sets) and whether it is at least t,
// giving up as soon as too few shingles are left for the intersection to
// reach t (most candidates are far below it).
func jaccardAtLeast(a, b []uint64, t float64) (float64, bool) {
	n := len(a) + len(b)
	if n == 0 {
		return 0, 0 >= t
	}
	// need is the least intersection that passes t, computed with the same
	// float division as the result (monotone in the intersection).
	need := sort.Search(min(len(a), len(b))+1, func(inter int) bool {
		return float64(inter)/float64(n-inter) >= t
	})
	inter, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		if inter+min(len(a)-i, len(b)-j) < need {
			return 0, false
		}
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			inter++
			i++
			j++
		}
	}
	s := float64(inter) / float64(n-inter)
	return s, s >= t
}

// nearPairs returns every pair of sets whose Jaccard is at least threshold,
// found through LSH candidates and verified exactly, ordered by (i, j).
// Sets must be sorted and duplicate-free (sortedShingles).
func nearPairs(sets [][]uint64, threshold float64) []simPair {
	n := len(sets)
	if n < 2 {
		return nil
	}
	workers := workersFor(n)

	// Band keys: keys[band*n+i] folds the band's lintRows MinHash values,
	// with its low idxBits replaced by i. Sorting a band then puts equal
	// keys (one bucket) together in task order. The bits given up only
	// merge a few more buckets: extra candidates, never a missed one.
	idxBits := bits.Len(uint(n - 1))
	mask := uint64(1)<<idxBits - 1
	keys := bandKeys(sets, mask, workers)
	from, to := bucketSpans(keys, n, mask, workers)
	return verifyBuckets(sets, threshold, keys, from, to, mask, workers)
}

// bandKeys are the band keys of every task (see nearPairs), made in
// parallel.
func bandKeys(sets [][]uint64, mask uint64, workers int) []uint64 {
	n := len(sets)
	keys := make([]uint64, lintBands*n)
	parallel(n, workers, func(lo, hi int) {
		sig := make([]uint64, lintBands*lintRows)
		var mixed []uint64
		for i := lo; i < hi; i++ {
			mixed = minHashSorted(sig, sets[i], mixed)
			for b := range lintBands {
				h := uint64(0)
				for _, v := range sig[b*lintRows : (b+1)*lintRows] {
					h = splitmix(h ^ v)
				}
				keys[b*n+i] = h&^mask | uint64(i)
			}
		}
	})
	return keys
}

// bucketSpans sorts each band's keys in place and returns the buckets:
// after sorting, band b's bucket members later than task i are
// keys[b*n+from : b*n+to] (index in the low bits).
func bucketSpans(keys []uint64, n int, mask uint64, workers int) (from, to []uint32) {
	from = make([]uint32, lintBands*n)
	to = make([]uint32, lintBands*n)
	parallel(lintBands, min(workers, lintBands), func(lo, hi int) {
		for b := lo; b < hi; b++ {
			k := keys[b*n : (b+1)*n]
			slices.Sort(k)
			for s := 0; s < n; {
				e := s + 1
				for e < n && k[e]&^mask == k[s]&^mask {
					e++
				}
				for p := s; p < e; p++ {
					i := b*n + int(k[p]&mask)
					from[i], to[i] = uint32(p+1), uint32(e)
				}
				s = e
			}
		}
	})
	return from, to
}

// verifyBuckets checks each task against the later members of its buckets,
// each candidate once, in blocks so the result comes back in task order.
func verifyBuckets(sets [][]uint64, threshold float64, keys []uint64, from, to []uint32, mask uint64, workers int) []simPair {
	n := len(sets)
	const block = 256
	blocks := make([][]simPair, (n+block-1)/block)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := make([]uint32, n) // seen[j] == i+1: j already tried against i
			for {
				bi := int(next.Add(1) - 1)
				if bi >= len(blocks) {
					return
				}
				var out []simPair
				for i := bi * block; i < min(n, (bi+1)*block); i++ {
					start := len(out)
					for b := range lintBands {
						for _, v := range keys[b*n+int(from[b*n+i]) : b*n+int(to[b*n+i])] {
							j := int(v & mask)
							if seen[j] == uint32(i+1) {
								continue
							}
							seen[j] = uint32(i + 1)
							// Jaccard is at most min/max of the sizes
							// (rounding keeps that order), so this only
							// skips pairs that cannot pass.
							la, lb := len(sets[i]), len(sets[j])
							if float64(min(la, lb))/float64(max(la, lb)) < threshold {
								continue
							}
							if s, ok := jaccardAtLeast(sets[i], sets[j], threshold); ok {
								out = append(out, simPair{i: i, j: j, s: s})
							}
						}
					}
					slices.SortFunc(out[start:], func(x, y simPair) int { return x.j - y.j })
				}
				blocks[bi] = out
			}
		}()
	}
	wg.Wait()
	var out []simPair
	for _, b := range blocks {
		out = append(out, b...)
	}
	return out
}

// workersFor is how many goroutines share n items: all CPUs, but none
// with fewer than 256 items (a bank of a hundred tasks runs on one).
func workersFor(n int) int {
	return min(runtime.GOMAXPROCS(0), max(1, n/256))
}

// parallel runs f over [0, n) split into one contiguous range per worker.
func parallel(n, workers int, f func(lo, hi int)) {
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// lshSeeds seed the lint's MinHash family, one per hash: fixed, so a bank
// always gets the same signatures and the same pairs.
var lshSeeds = func() (s [lintBands * lintRows]uint64) {
	for k := range s {
		s[k] = splitmix(uint64(k) + 0x16)
	}
	return s
}()

var _ = [1]struct{}{}[lintBands*lintRows%4]

// minHashSorted fills sig (lintBands×lintRows values) with the MinHash
// signature of set. Each shingle is mixed once with splitmix; the k-th hash
// is then one xor with seed k, a multiply and an xor-shift, cheaper than
// a splitmix per hash (minHash's family); at 320 hashes this is most of
// the lint's time. TestLSHBandRate checks that band agreement
// follows s^r for this family.
func minHashSorted(sig []uint64, set []uint64, mixed []uint64) []uint64 {
	mixed = mixed[:0]
	for _, x := range set {
		mixed = append(mixed, splitmix(x))
	}
	// Four hashes per pass over the shingles (lintBands×lintRows is a
	// multiple of 4, checked above).
	const mul = 0xbf58476d1ce4e5b9
	for k := 0; k < len(sig); k += 4 {
		s0, s1, s2, s3 := lshSeeds[k], lshSeeds[k+1], lshSeeds[k+2], lshSeeds[k+3]
		m0, m1, m2, m3 := uint64(math.MaxUint64), uint64(math.MaxUint64), uint64(math.MaxUint64), uint64(math.MaxUint64)
		for _, y := range mixed {
			v0, v1, v2, v3 := (y^s0)*mul, (y^s1)*mul, (y^s2)*mul, (y^s3)*mul
			m0, m1 = min(m0, v0^(v0>>32)), min(m1, v1^(v1>>32))
			m2, m3 = min(m2, v2^(v2>>32)), min(m3, v3^(v3>>32))
		}
		sig[k], sig[k+1], sig[k+2], sig[k+3] = m0, m1, m2, m3
	}
	return mixed
}
