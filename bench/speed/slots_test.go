package speed

import (
	"context"
	"os"
	"strings"
	"testing"

	"rig/internal/provision"
	"rig/internal/testenv"
)

// parseBatchedBench reads llama-batched-bench's jsonl line and refuses
// output with no line (a run whose -c is too small prints none) or several.
func TestParseBatchedBench(t *testing.T) {
	line := `{"n_kv_max": 4096, "n_batch": 2048, "n_ubatch": 512, "flash_attn": -1, "is_pp_shared": 0, "n_gpu_layers": -1, "n_threads": 1, "n_threads_batch": 1, "pp": 100, "tg": 32, "pl": 2, "n_kv": 264, "t_pp": 1.314961, "speed_pp": 152.095764, "t_tg": 1.190931, "speed_tg": 53.739471, "t": 2.505892, "speed": 105.351715}`
	bb, err := parseBatchedBench([]byte("main: loading\n" + line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if bb.PP != 100 || bb.TG != 32 || bb.PL != 2 || bb.STG != 53.739471 || bb.S != 105.351715 || bb.T != 2.505892 {
		t.Errorf("read %+v", bb)
	}
	for _, bad := range []string{"", "no json here\n", line + "\n" + line + "\n", `{"pp": 1, "tg": 1, "pl": 1}`} {
		if _, err := parseBatchedBench([]byte(bad)); err == nil {
			t.Errorf("%q: read without error", bad)
		}
	}
}

// The reference runs what the server runs: same model, threads, cache
// type, one KV stream of the pinned context per sequence, no repacking.
func TestBatchedBenchArgs(t *testing.T) {
	req := SlotsRequest{Installed: provision.Installed{LlamaBatchedBench: "/b/llama-batched-bench"}, Context: 2048, PromptTokens: 128, GenTokens: 96}
	got := strings.Join(batchedBenchArgs(req, provision.Model{Path: "/m/s.gguf"}, 2, 4), " ")
	want := "/b/llama-batched-bench -m /m/s.gguf -t 2 -c 8192 -npp 128 -ntg 96 -npl 4 -ctk f16 -ctv f16 --no-repack --poll 0 --output-format jsonl"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestSlotsBenchRuns runs the bench small on the real runtime and the real
// llama-batched-bench: every row has its batches and its reference, every
// request ran to its stop cap, and the ratios are printed (not asserted:
// they are timings).
func TestSlotsBenchRuns(t *testing.T) {
	testenv.Long(t, "starts llama-server and llama-batched-bench")
	in, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes", err)
	if in.LlamaBatchedBench == "" {
		testenv.NeedsSetup(t, "llama-batched-bench", os.ErrNotExist)
	}
	res, err := RunSlots(context.Background(), SlotsRequest{Installed: in, Slots: []int{1, 2}, PromptTokens: 32, GenTokens: 16, Reps: 1, Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(res.Rows))
	}
	for _, row := range res.Rows {
		if len(row.Batches) != 1 || len(row.Bench) != 1 || row.Bench[0].PL != row.Slots || row.Ratio <= 0 {
			t.Errorf("%d slots: %+v", row.Slots, row)
		}
		for _, b := range row.Batches {
			if b.OutputTokens != 16*row.Slots || b.PromptTokens != 32*row.Slots || b.Short != 0 {
				t.Errorf("%d slots: batch %+v, want every request to read 32 and make 16 tokens", row.Slots, b)
			}
		}
	}
	var out strings.Builder
	if err := res.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
}
