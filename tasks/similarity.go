package tasks

import (
	"math"
	"sort"
	"strings"
	"unicode"
)

// words splits text into lower-case runs of letters and digits; punctuation
// and layout never make two texts look different.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// shingles hashes every n-word window. A text shorter than n words yields
// one shingle of all its words, so short texts still compare.
func shingles(ws []string, n int) map[uint64]struct{} {
	set := map[uint64]struct{}{}
	if len(ws) == 0 {
		return set
	}
	if len(ws) < n {
		set[hashWords(ws)] = struct{}{}
		return set
	}
	for i := 0; i+n <= len(ws); i++ {
		set[hashWords(ws[i:i+n])] = struct{}{}
	}
	return set
}

// hashWords is 64-bit FNV-1a of the words, each followed by a zero byte
// (inlined: hash/fnv's interface allocates, and lint hashes every shingle
// of every task).
func hashWords(ws []string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, w := range ws {
		for i := 0; i < len(w); i++ {
			h ^= uint64(w[i])
			h *= prime
		}
		h *= prime // the zero byte: h ^= 0 changes nothing
	}
	return h
}

func jaccard(a, b map[uint64]struct{}) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 0
	}
	inter := 0
	for x := range a {
		if _, ok := b[x]; ok {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// containment is the share of a's shingles found in b: a task copied into a
// long retrieval document has low Jaccard but full containment.
func containment(a, b map[uint64]struct{}) float64 {
	if len(a) == 0 {
		return 0
	}
	inter := 0
	for x := range a {
		if _, ok := b[x]; ok {
			inter++
		}
	}
	return float64(inter) / float64(len(a))
}

// minHashSize is the number of hash functions in a MinHash signature; the
// standard error of the Jaccard estimate is about 1/sqrt(128) ≈ 0.09.
const minHashSize = 128

type signature [minHashSize]uint64

// minHash builds a signature with seeded splitmix64 permutations of the
// shingle hashes, so signatures of large datasets can be kept and compared
// without the texts.
func minHash(set map[uint64]struct{}) signature {
	var s signature
	for i := range s {
		s[i] = math.MaxUint64
	}
	for x := range set {
		for i := range s {
			if h := splitmix(x ^ uint64(i)*0x9e3779b97f4a7c15); h < s[i] {
				s[i] = h
			}
		}
	}
	return s
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (s signature) jaccard(o signature) float64 {
	eq := 0
	for i := range s {
		if s[i] == o[i] {
			eq++
		}
	}
	return float64(eq) / minHashSize
}

// taskText is the text a task shows a model: the prompt and its files in
// path order.
func taskText(t Task) string {
	var b strings.Builder
	b.WriteString(t.Input.Prompt)
	paths := make([]string, 0, len(t.Input.Files))
	for p := range t.Input.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		b.WriteString("\n")
		b.WriteString(t.Input.Files[p])
	}
	return b.String()
}
