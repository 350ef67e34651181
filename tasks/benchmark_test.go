package tasks

import (
	"context"
	"strings"
	"testing"
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
