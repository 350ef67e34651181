package preflight

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"rig/internal/gguf"
)

// sameConstants is the committed calibration with Ollama's constants set to
// llama-server's, so two runtimes differ only where the memory model says.
func sameConstants(t *testing.T) *Calibration {
	t.Helper()
	cal := mustCal(t)
	out := *cal
	out.Runtimes = maps.Clone(cal.Runtimes)
	out.Runtimes[RuntimeOllama] = cal.Runtimes[RuntimeLlamaServer]
	return &out
}

func TestOllamaEngineMemory(t *testing.T) {
	cal := sameConstants(t)
	p := Profile{Name: "sim", CardMemory: 8 * GiB, Context: 2048, Simulated: true}
	for _, c := range []struct {
		arch string
		dup  bool
	}{{"gemma3", true}, {"llama", false}} {
		f := fakeModel(t, c.arch, 4, 256, 4, 2, 64, 0, 1000)
		var embd uint64
		for _, tn := range f.Tensors {
			if tn.Name == "token_embd.weight" {
				embd = tn.Bytes()
			}
		}
		ls, err := Predict(f, p, RuntimeLlamaServer, cal)
		if err != nil {
			t.Fatal(err)
		}
		ol, err := Predict(f, p, RuntimeOllama, cal)
		if err != nil {
			t.Fatal(err)
		}
		want := ls.Weights
		if c.dup {
			want += Size(embd)
		}
		if ol.Weights != want {
			t.Errorf("%s: Ollama weights %d, llama-server %d, token_embd %d; want Ollama %d", c.arch, ol.Weights, ls.Weights, embd, want)
		}
		// Ollama's engine also builds the worst-case mask as float32 twice.
		wantMask := Size(0)
		if c.dup {
			wantMask = Size((ol.KVCells + ol.SWACells) * min(cal.Runtimes[RuntimeOllama].UBatch, ol.KVCells) * 8)
		}
		if ol.Compute-ls.Compute != wantMask || ol.Peak-ls.Peak != (ol.Weights-ls.Weights)+wantMask {
			t.Errorf("%s: Ollama compute %d, llama-server %d; want %d more; peaks %d vs %d", c.arch, ol.Compute, ls.Compute, wantMask, ol.Peak, ls.Peak)
		}
	}
}

// The margin rig trusts is each runtime's own measured error from the
// calibration table: a card that clears one runtime's error but not the
// other's fits on the first and is refused on the second.
func TestDecideUsesEachRuntimesMeasuredError(t *testing.T) {
	cal := sameConstants(t)
	ls, ol := cal.Runtimes[RuntimeLlamaServer], cal.Runtimes[RuntimeOllama]
	ls.RelError, ol.RelError = 0.04, 0.12
	cal.Runtimes[RuntimeLlamaServer], cal.Runtimes[RuntimeOllama] = ls, ol
	f := fakeModel(t, "llama", 4, 256, 4, 2, 64, 0, 1000)
	p := Profile{Name: "sim", CardMemory: 8 * GiB, Context: 2048, Simulated: true}
	e, err := Predict(f, p, RuntimeLlamaServer, cal)
	if err != nil {
		t.Fatal(err)
	}
	p.CardMemory = Size(float64(e.Card) * 1.08) // 8% margin: between the two errors
	for rt, wantFits := range map[string]bool{RuntimeLlamaServer: true, RuntimeOllama: false} {
		e, err := Predict(f, p, rt, cal)
		if err != nil {
			t.Fatal(err)
		}
		if e.RelError != cal.Runtimes[rt].RelError {
			t.Errorf("%s: estimate carries error %.2f, calibration says %.2f", rt, e.RelError, cal.Runtimes[rt].RelError)
		}
		v := Decide(e, p, time.Unix(0, 0))
		if v.Fits != wantFits {
			t.Errorf("%s at an 8%% margin: fits=%v (%s); want %v", rt, v.Fits, v.Reason, wantFits)
		}
		if !wantFits && !strings.Contains(v.Reason, "measured error of 12%") {
			t.Errorf("%s: refusal does not name the runtime's measured error: %s", rt, v.Reason)
		}
	}
}

// The committed table's errors are the ones verdicts use.
func TestCommittedErrorsReachVerdicts(t *testing.T) {
	cal := mustCal(t)
	f := fakeModel(t, "gemma3", 4, 256, 4, 2, 64, 0, 1000)
	for _, rt := range []string{RuntimeLlamaServer, RuntimeOllama} {
		rc, err := cal.For(rt)
		if err != nil {
			t.Fatal(err)
		}
		p := Profile{Name: "sim", CardMemory: 8 * GiB, Context: 2048, Simulated: true}
		e, err := Predict(f, p, rt, cal)
		if err != nil {
			t.Fatal(err)
		}
		// Half the trusted margin: the prediction fits, fitting is not shown.
		p.CardMemory = Size(float64(e.Card) * (1 + rc.RelError/2))
		if v := Decide(e, p, time.Unix(0, 0)); v.Fits || v.Needed != int64(rc.RelError*float64(e.Card)) {
			t.Errorf("%s: margin below its measured error %.0f%%: fits=%v needed=%d (%s)", rt, 100*rc.RelError, v.Fits, v.Needed, v.Reason)
		}
		p.CardMemory = Size(float64(e.Card) * (1 + 2*rc.RelError))
		if v := Decide(e, p, time.Unix(0, 0)); !v.Fits {
			t.Errorf("%s: margin twice its measured error %.0f%% refused: %s", rt, 100*rc.RelError, v.Reason)
		}
	}
}

func TestOllamaRunsAtMostTheTrainedContext(t *testing.T) {
	cal := sameConstants(t)
	meta := fakeModel(t, "llama", 4, 256, 4, 2, 64, 0, 1000)
	meta.Metadata = append(meta.Metadata, gguf.KV{Key: "llama.context_length", Type: gguf.ValueUint32, Value: uint32(8192)})
	p := Profile{Name: "sim", CardMemory: 8 * GiB, Context: 32768, Simulated: true}
	ls, err := Predict(meta, p, RuntimeLlamaServer, cal)
	if err != nil {
		t.Fatal(err)
	}
	ol, err := Predict(meta, p, RuntimeOllama, cal)
	if err != nil {
		t.Fatal(err)
	}
	if ls.KVCells != 32768 || ol.KVCells != 8192 || ol.KVCache*4 != ls.KVCache {
		t.Errorf("cells: llama-server %d, Ollama %d; KV %s vs %s", ls.KVCells, ol.KVCells, ls.KVCache, ol.KVCache)
	}
	if !slices.ContainsFunc(ol.Notes, func(n string) bool { return strings.Contains(n, "lowers context 32768") }) {
		t.Errorf("no note that Ollama does not hold the pinned context: %v", ol.Notes)
	}
}

// Ollama's launcher writes its own copy of the model file inside a simulated
// card's reservation: the estimate carries the copy beside the need, not in
// what must fit, and the verdict prints the peak a reservation with room
// reads. llama-server, and Ollama on a real card (no reservation), carry none.
func TestOllamaModelCopy(t *testing.T) {
	cal := sameConstants(t)
	cuda := cal.Runtimes[RuntimeOllama]
	cuda.CardContextBytes = 300 * float64(MiB) // made up for the arithmetic, not measured
	cal.Runtimes[CalibrationKey(RuntimeOllama, "cuda")] = cuda
	f := fakeModel(t, "llama", 4, 256, 4, 2, 64, 0, 1000)
	f.Size = int64(2 * GiB) // a file far larger than its need, so the copy decides the test
	p := Profile{Name: "sim", CardMemory: 8 * GiB, Context: 2048, Simulated: true}
	ls, err := Predict(f, p, RuntimeLlamaServer, cal)
	if err != nil {
		t.Fatal(err)
	}
	ol, err := Predict(f, p, RuntimeOllama, cal)
	if err != nil {
		t.Fatal(err)
	}
	if ls.ModelCopy != 0 || ls.ReservationPeak() != ls.Peak {
		t.Errorf("llama-server reads the file where it is, cached outside; it counts a copy of %s", ls.ModelCopy)
	}
	if ol.ModelCopy != Size(f.Size) || ol.ReservationPeak() != ol.Peak+Size(f.Size) {
		t.Errorf("Ollama: model copy %s, reservation peak %s; want the file's %s beside the need %s", ol.ModelCopy, ol.ReservationPeak(), Size(f.Size), ol.Peak)
	}
	if ol.Card != ls.Card || ol.Peak != ls.Peak {
		t.Errorf("the copy is reclaimable, not part of what must fit: Ollama needs %s (peak %s), llama-server %s (peak %s) with the same constants", ol.Card, ol.Peak, ls.Card, ls.Peak)
	}

	p.CardMemory = Size(float64(ol.Card) * (1 + 2*ol.RelError))
	v := Decide(ol, p, time.Unix(0, 0))
	if !v.Fits || p.CardMemory >= ol.ReservationPeak() {
		t.Errorf("a card of %s (the need %s and twice its error, less than the peak with the copy %s): fits=%v (%s)", p.CardMemory, ol.Card, ol.ReservationPeak(), v.Fits, v.Reason)
	}
	var out strings.Builder
	if err := v.Print(&out); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("reads a peak of about %s (±%.0f%%)", ol.ReservationPeak(), 100*ol.RelError)
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "copy of the model file ("+Size(f.Size).String()+")") {
		t.Errorf("the verdict does not print the peak with Ollama's copy (want %q):\n%s", want, out.String())
	}

	card, err := Predict(f, Profile{Name: "h200", CardMemory: 80 * GiB, Context: 2048, OffloadLayers: OffloadAll, Backend: "cuda"}, RuntimeOllama, cal)
	if err != nil {
		t.Fatal(err)
	}
	if card.ModelCopy != 0 {
		t.Errorf("a real card has no reservation to charge the copy to; the estimate counts %s", card.ModelCopy)
	}
}
