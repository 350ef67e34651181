package tasks

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// duplicatesExhaustive is the all-pairs check duplicates replaced: the
// reference the LSH path must match, and the baseline of the benchmark.
func duplicatesExhaustive(ts []Task) (exact, near []Pair) {
	norm := make([]string, len(ts))
	sets := make([]map[uint64]struct{}, len(ts))
	for i, t := range ts {
		ws := words(taskText(t))
		norm[i] = strings.Join(ws, " ")
		sets[i] = shingles(ws, lintShingle)
	}
	for i := range ts {
		for j := i + 1; j < len(ts); j++ {
			if norm[i] == norm[j] {
				exact = append(exact, Pair{A: ts[i].ID, B: ts[j].ID, Similarity: 1})
				continue
			}
			if s := jaccard(sets[i], sets[j]); s >= lintThreshold {
				near = append(near, Pair{A: ts[i].ID, B: ts[j].ID, Similarity: s})
			}
		}
	}
	return exact, near
}

// syntheticTasks builds n tasks the way a large bank grows: most are one
// or two bundled tasks with a tenth of their words swapped for others
// (a template with new slot values), 5% are an earlier task with one word
// (a quarter of them two) replaced, inserted or deleted (near duplicates
// on both sides of the threshold), and 0.5% are an earlier task with only
// its case and punctuation changed (exact duplicates). The seed fixes the
// bank.
func syntheticTasks(tb testing.TB, n int, seed uint64) []Task {
	tb.Helper()
	bs, err := Bundled()
	if err != nil {
		tb.Fatal(err)
	}
	var bases [][]string
	for _, b := range bs {
		for _, t := range b.Tasks {
			bases = append(bases, strings.Fields(taskText(t)))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 16))
	word := func() string { return fmt.Sprintf("w%x", rng.IntN(20000)) }
	texts := make([][]string, n)
	ts := make([]Task, n)
	for k := range ts {
		var ws []string
		switch r := rng.Float64(); {
		case k > 0 && r < 0.005:
			ws = append([]string(nil), texts[rng.IntN(k)]...)
			ws[0] = strings.ToUpper(ws[0]) + ","
		case k > 0 && r < 0.055:
			ws = append([]string(nil), texts[rng.IntN(k)]...)
			for range 1 + rng.IntN(4)/3 {
				p := rng.IntN(len(ws))
				switch rng.IntN(3) {
				case 0:
					ws[p] = word()
				case 1:
					ws = append(ws[:p], append([]string{word()}, ws[p:]...)...)
				default:
					if len(ws) > 1 {
						ws = append(ws[:p], ws[p+1:]...)
					}
				}
			}
		default:
			ws = append([]string(nil), bases[rng.IntN(len(bases))]...)
			if rng.IntN(2) == 0 {
				ws = append(ws, bases[rng.IntN(len(bases))]...)
			}
			for p := range ws {
				if rng.Float64() < 0.1 {
					ws[p] = word()
				}
			}
		}
		texts[k] = ws
		ts[k] = Task{ID: fmt.Sprintf("syn-%06d", k), Input: Input{Prompt: strings.Join(ws, " ")}}
	}
	return ts
}

// jaccardSorted is jaccard for sorted, duplicate-free slices.
func jaccardSorted(a, b []uint64) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 0
	}
	inter, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
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
	return float64(inter) / float64(len(a)+len(b)-inter)
}

func TestHashWordsIsFNV(t *testing.T) {
	for _, ws := range [][]string{{}, {""}, {"a"}, {"the", "quick", "fox"}, {"ünï", "42"}} {
		h := fnv.New64a()
		for _, w := range ws {
			h.Write([]byte(w))
			h.Write([]byte{0})
		}
		if got := hashWords(ws); got != h.Sum64() {
			t.Errorf("hashWords(%q) = %x, want FNV-1a %x", ws, got, h.Sum64())
		}
	}
}

// TestLSHBandRate checks the arithmetic behind lintBands and lintRows for
// the hash family: over pairs of sets of known Jaccard s, a band agrees in
// about s^r of cases, and at the threshold no pair goes without a band.
func TestLSHBandRate(t *testing.T) {
	next := uint64(0)
	fresh := func() uint64 { next++; return splitmix(next) }
	for _, c := range []struct{ shared, own int }{{180, 10}, {100, 50}, {60, 70}} {
		s := float64(c.shared) / float64(c.shared+2*c.own)
		const pairs = 2000
		agree, missed := 0, 0
		sa, sb := make([]uint64, lintBands*lintRows), make([]uint64, lintBands*lintRows)
		for range pairs {
			var a, b []uint64
			for range c.shared {
				x := fresh()
				a, b = append(a, x), append(b, x)
			}
			for range c.own {
				a, b = append(a, fresh()), append(b, fresh())
			}
			minHashSorted(sa, a, nil)
			minHashSorted(sb, b, nil)
			hit := false
			for band := range lintBands {
				if slices.Equal(sa[band*lintRows:(band+1)*lintRows], sb[band*lintRows:(band+1)*lintRows]) {
					agree++
					hit = true
				}
			}
			if !hit {
				missed++
			}
		}
		got, want := float64(agree)/(pairs*lintBands), math.Pow(s, lintRows)
		if math.Abs(got-want) > 0.01+0.05*want {
			t.Errorf("s = %.2f: a band agrees in %.4f of cases, want s^%d = %.4f", s, got, lintRows, want)
		}
		if s >= lintThreshold && missed > 0 {
			t.Errorf("s = %.2f: %d of %d pairs share no band (expected about %.1e)", s, missed, pairs, pairs*math.Pow(1-want, lintBands))
		}
	}
}

func checkSameAsExhaustive(t *testing.T, ts []Task) (exact, near []Pair) {
	t.Helper()
	exact, near = duplicates(ts)
	wantExact, wantNear := duplicatesExhaustive(ts)
	if !reflect.DeepEqual(exact, wantExact) {
		t.Errorf("exact duplicates: LSH path %d pairs, exhaustive %d\n got %v\nwant %v", len(exact), len(wantExact), exact, wantExact)
	}
	if !reflect.DeepEqual(near, wantNear) {
		t.Errorf("near duplicates: LSH path %d pairs, exhaustive %d\n got %v\nwant %v", len(near), len(wantNear), near, wantNear)
	}
	return exact, near
}

func TestDuplicatesBundledMatchExhaustive(t *testing.T) {
	bs, err := Bundled()
	if err != nil {
		t.Fatal(err)
	}
	var all []Task
	for _, b := range bs {
		t.Run(b.File, func(t *testing.T) { checkSameAsExhaustive(t, b.Tasks) })
		all = append(all, b.Tasks...)
	}
	// The banks together, each task twice and once more with a word
	// dropped: every exact and near pair must still come out, in bank order.
	var doubled []Task
	for i, tk := range all {
		doubled = append(doubled, tk)
		cp := tk
		cp.ID += "-copy"
		doubled = append(doubled, cp)
		if i%3 == 0 {
			ed := tk
			ed.ID += "-edit"
			ed.Input.Prompt = strings.Replace(ed.Input.Prompt, " ", "  x ", 1)
			doubled = append(doubled, ed)
		}
	}
	exact, near := checkSameAsExhaustive(t, doubled)
	if len(exact) < len(all) || len(near) == 0 {
		t.Errorf("the doubled banks gave %d exact and %d near pairs; want >= %d exact and some near", len(exact), len(near), len(all))
	}
}

func TestDuplicatesSyntheticRecall(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 500 // the exhaustive reference is quadratic
	}
	ts := syntheticTasks(t, n, 1)
	exact, near := checkSameAsExhaustive(t, ts)
	// The bank must test something: pairs on both sides of the threshold.
	below := 0
	sets := make([][]uint64, len(ts))
	for i, tk := range ts {
		sets[i] = sortedShingles(words(taskText(tk)), lintShingle)
	}
	for i := range sets {
		for j := i + 1; j < len(sets); j++ {
			if s := jaccardSorted(sets[i], sets[j]); s >= 0.8 && s < lintThreshold {
				below++
			}
		}
	}
	if !testing.Short() && (len(exact) < 3 || len(near) < 20 || below < 10) {
		t.Errorf("synthetic bank too easy: %d exact, %d near, %d in [0.8, %.1f)", len(exact), len(near), below, lintThreshold)
	}
	t.Logf("%d synthetic tasks: %d exact, %d near (all found), %d pairs just below the threshold", n, len(exact), len(near), below)
}

func TestDuplicatesDeterministic(t *testing.T) {
	ts := syntheticTasks(t, 3000, 2)
	e1, n1 := duplicates(ts)
	e2, n2 := duplicates(ts)
	if !reflect.DeepEqual(e1, e2) || !reflect.DeepEqual(n1, n2) {
		t.Error("two runs over one bank gave different pairs")
	}
}
