package analysis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchInput is the speed goal's shape: 1,000 tasks × 8 arms, 7 challengers
// named against the incumbent, 10,000 resamples.
func benchInput(measure Measure) Input {
	const tasks, arms = 1000, 8
	d := Design{Hash: "bench", Incumbent: "arm0", Seed: 1, Resamples: 10000,
		JobKinds: []JobKind{{Name: "job", Measure: measure}}}
	for a := range arms {
		d.Arms = append(d.Arms, Arm{Name: fmt.Sprintf("arm%d", a)})
		if a > 0 {
			d.Pairs = append(d.Pairs, Pair{Candidate: fmt.Sprintf("arm%d", a), Baseline: "arm0"})
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	ts := make([]Trial, 0, tasks*arms)
	for t := range tasks {
		u := rng.Float64()
		for a := range arms {
			s := min(1, max(0, u+0.2*rng.NormFloat64()+0.01*float64(a)))
			ts = append(ts, Trial{DesignHash: "bench", Arm: d.Arms[a].Name, JobKind: "job", Task: fmt.Sprintf("t%04d", t),
				Score: s, Pass: s > 0.5, WallSeconds: 3})
		}
	}
	return Input{Design: d, Trials: ts}
}

// BenchmarkAnalyse is the speed goal: at most 2 s per op on 2 cores
// (go test -bench Analyse -cpu 2).
func BenchmarkAnalyse(b *testing.B) {
	for _, m := range []Measure{MeasurePass, MeasureScore} {
		in := benchInput(m)
		b.Run(string(m), func(b *testing.B) {
			for b.Loop() {
				if _, err := Analyse(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkResample(b *testing.B) {
	in := benchInput(MeasureScore)
	tables, _ := buildTables(in.Design.withDefaults(), in.Trials)
	tb := tables[0]
	x := make([]float64, 0, len(tb.tasks)*len(tb.arms))
	for _, row := range tb.val {
		x = append(x, row...)
	}
	r := resampler{x: x, n: len(tb.tasks), k: len(tb.arms)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.means(context.Background(), 10000, 1, 1); err != nil {
			b.Fatal(err)
		}
	}
}
