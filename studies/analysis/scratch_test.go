package analysis

import (
	"context"
	"os"
	"testing"
)

func TestScratchBench(t *testing.T) {
	res, err := BenchStats(context.Background(), os.Stdout, BenchOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Pass)
}
