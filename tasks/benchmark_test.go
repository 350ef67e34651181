package tasks

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkCheckLeakage measures both bundled banks against a 1 MB
// training dataset, the size a design typically declares.
func BenchmarkCheckLeakage(b *testing.B) {
	bs, err := Bundled()
	if err != nil {
		b.Fatal(err)
	}
	doc := strings.Repeat("the quick brown fox jumps over the lazy dog and keeps running ", 16000)
	places := []Place{{Name: "train.txt", Kind: PlaceTraining, Text: doc}}
	b.ResetTimer()
	for b.Loop() {
		if _, err := CheckLeakage(context.Background(), bs, places); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeakNearDuplicates times the lint's near-duplicate check on
// 1k, 10k and 100k synthetic tasks (syntheticTasks). ns/op is the LSH path;
// for 1k and 10k the exhaustive all-pairs check runs once beside it and
// exhaustive-s and speedup (exhaustive time over LSH time) report it. At
// 100k the exhaustive check would take hours and is left out.
func BenchmarkLeakNearDuplicates(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		ts := syntheticTasks(b, n, 16)
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			var old time.Duration
			if n <= 10000 {
				start := time.Now()
				duplicatesExhaustive(ts)
				old = time.Since(start)
			}
			var near int
			for b.Loop() {
				_, nr := duplicates(ts)
				near = len(nr)
			}
			lsh := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(lsh.Seconds(), "lsh-s")
			b.ReportMetric(float64(near), "near-pairs")
			if old > 0 {
				b.ReportMetric(old.Seconds(), "exhaustive-s")
				b.ReportMetric(float64(old)/float64(lsh), "speedup")
			}
		})
	}
}

func BenchmarkParseBank(b *testing.B) {
	for b.Loop() {
		if _, err := LoadBank("banks/fix-test.jsonl"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONGrade(b *testing.B) {
	task := keyTask("json", `{"fields":{"name":"Liam Ortiz","total":1250.5}}`)
	out := Output{Text: "Here you go:\n```json\n{\"name\": \"Liam Ortiz\", \"total\": 1250.5}\n```"}
	g := JSONMatch{}
	for b.Loop() {
		if _, err := g.Grade(context.Background(), task, out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckLeakageTasks times the whole leakage check (exact
// substring, 8-gram containment, MinHash) of 1k, 10k and 100k synthetic
// tasks against a 1 MB training dataset of the same vocabulary with ten of
// the tasks pasted in. ns/task staying flat across the sizes shows no step
// grows with tasks × dataset size.
func BenchmarkCheckLeakageTasks(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		ts := syntheticTasks(b, n, 16)
		bank := &Bank{File: "synthetic.jsonl", Tasks: ts}
		var doc strings.Builder
		for i := 0; doc.Len() < 1<<20; i++ {
			fmt.Fprintf(&doc, "w%x ", (i*7919)%20000)
			if i%20000 == 0 {
				doc.WriteString(taskText(ts[(i/20000)%n]) + " ")
			}
		}
		places := []Place{{Name: "train.txt", Kind: PlaceTraining, Text: doc.String()}}
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			var hits int
			for b.Loop() {
				r, err := CheckLeakage(context.Background(), []*Bank{bank}, places)
				if err != nil {
					b.Fatal(err)
				}
				hits = len(r.Hits)
			}
			if hits == 0 {
				b.Fatal("the pasted tasks were not found")
			}
			b.ReportMetric(float64(hits), "hits")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/task")
		})
	}
}
