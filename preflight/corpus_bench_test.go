package preflight

import (
	"bytes"
	"testing"
	"time"

	"rig/internal/gguf"
)

// BenchmarkPreflightCorpus times the preflight path, header to verdict, on
// the largest valid GGUF header of the hostile-input corpus (LargeHeader:
// 200 layers, 601 tensors, a 4000-token vocabulary and 200 extra keys): what
// one `rig preflight` costs before it decides.
// header-bytes is the size of the file read.
func BenchmarkPreflightCorpus(b *testing.B) {
	const path = "many-tensors.gguf"
	data, err := gguf.LargeHeader()
	if err != nil {
		b.Fatal(err)
	}
	cal, err := DefaultCalibration()
	if err != nil {
		b.Fatal(err)
	}
	p := Profile{Name: "bench", CardMemory: 8 * GiB, Context: 4096, Parallel: 1, Simulated: true, OffloadLayers: OffloadAll}
	b.ReportAllocs()
	for b.Loop() {
		f, err := gguf.Read(bytes.NewReader(data), int64(len(data)), path)
		if err != nil {
			b.Fatal(err)
		}
		e, err := Predict(f, p, RuntimeLlamaServer, cal)
		if err != nil {
			b.Fatal(err)
		}
		if Decide(e, p, time.Unix(0, 0)).Outcome == "" {
			b.Fatal("no verdict")
		}
	}
	b.ReportMetric(float64(len(data)), "header-bytes")
}
