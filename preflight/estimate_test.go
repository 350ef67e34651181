package preflight

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"rig/internal/gguf"
)

// fakeModel builds a GGUF header in memory with the given architecture keys
// and one small tensor per layer, for memory-model tests.
func fakeModel(t *testing.T, arch string, layers, embd, heads, kvHeads, headDim, swa, vocab int) *gguf.File {
	t.Helper()
	meta := []gguf.KV{
		{Key: "general.architecture", Type: gguf.ValueString, Value: arch},
		{Key: arch + ".block_count", Type: gguf.ValueUint32, Value: uint32(layers)},
		{Key: arch + ".embedding_length", Type: gguf.ValueUint32, Value: uint32(embd)},
		{Key: arch + ".feed_forward_length", Type: gguf.ValueUint32, Value: uint32(4 * embd)},
		{Key: arch + ".attention.head_count", Type: gguf.ValueUint32, Value: uint32(heads)},
		{Key: arch + ".attention.head_count_kv", Type: gguf.ValueUint32, Value: uint32(kvHeads)},
		{Key: arch + ".attention.key_length", Type: gguf.ValueUint32, Value: uint32(headDim)},
		{Key: arch + ".attention.value_length", Type: gguf.ValueUint32, Value: uint32(headDim)},
		{Key: arch + ".vocab_size", Type: gguf.ValueUint32, Value: uint32(vocab)},
	}
	if swa > 0 {
		meta = append(meta, gguf.KV{Key: arch + ".attention.sliding_window", Type: gguf.ValueUint32, Value: uint32(swa)})
	}
	var ts []gguf.Tensor
	for l := 0; l < layers; l++ {
		ts = append(ts, gguf.Tensor{Info: gguf.TensorInfo{Name: fmt.Sprintf("blk.%d.attn_q.weight", l), Dims: []uint64{32, 4}, Type: gguf.TypeQ8_0}, Data: make([]byte, 4*34)})
	}
	ts = append(ts, gguf.Tensor{Info: gguf.TensorInfo{Name: "token_embd.weight", Dims: []uint64{32, 8}, Type: gguf.TypeF16}, Data: make([]byte, 32*8*2)})
	var buf bytes.Buffer
	if err := gguf.Encode(&buf, meta, ts); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), arch+".gguf")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustCal(t *testing.T) *Calibration {
	t.Helper()
	c, err := DefaultCalibration()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func predict(t *testing.T, f *gguf.File, p Profile) Estimate {
	t.Helper()
	p.Simulated = true
	if p.CardMemory == 0 {
		p.CardMemory = 8 * GiB
	}
	e, err := Predict(f, p, RuntimeLlamaServer, mustCal(t))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestKVCacheFormula(t *testing.T) {
	cal := mustCal(t)
	rc, _ := cal.For(RuntimeLlamaServer)
	cases := []struct {
		name                                   string
		layers, embd, heads, kvh, hd, swa, ctx int
		slots                                  int
		kv                                     string
	}{
		{"llama-like f16", 30, 576, 9, 3, 64, 0, 8192, 1, "f16"},
		{"llama-like q8_0", 30, 576, 9, 3, 64, 0, 8192, 1, "q8_0"},
		{"two slots", 30, 576, 9, 3, 64, 0, 4096, 2, "f16"},
		{"gemma3-like swa", 18, 640, 4, 1, 256, 512, 32768, 1, "f16"},
		{"odd context padded", 4, 64, 4, 2, 16, 0, 1000, 1, "q4_0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fakeModel(t, "gemma3", c.layers, c.embd, c.heads, c.kvh, c.hd, c.swa, 1000)
			if c.swa == 0 {
				f = fakeModel(t, "llama", c.layers, c.embd, c.heads, c.kvh, c.hd, 0, 1000)
			}
			e := predict(t, f, Profile{Context: c.ctx, KVType: c.kv, Parallel: c.slots})
			bpe := map[string]float64{"f16": 2, "q8_0": 34.0 / 32, "q4_0": 18.0 / 32}[c.kv]
			cells := (c.ctx*c.slots + rc.CtxPad - 1) / rc.CtxPad * rc.CtxPad
			global, local := c.layers, 0
			localCells := 0
			if c.swa > 0 {
				global = c.layers / 6 // gemma3: every sixth layer is global
				local = c.layers - global
				localCells = min(cells, (c.swa+rc.UBatch+rc.CtxPad-1)/rc.CtxPad*rc.CtxPad)
			}
			want := (float64(global*cells) + float64(local*localCells)) * float64(c.kvh*2*c.hd) * bpe
			if got := float64(e.KVCache); got < want-1 || got > want+1 {
				t.Errorf("KV %s (%.0f bytes), want %.0f", e.KVCache, got, want)
			}
			if e.SWALayers != local {
				t.Errorf("sliding-window layers %d, want %d", e.SWALayers, local)
			}
			if e.Peak != e.Weights+e.KVCache+e.Recurrent+e.Compute+e.Output+e.Overhead {
				t.Errorf("peak %s is not the sum of its parts %+v", e.Peak, e)
			}
		})
	}
}

func TestKVScalesWithContextAndType(t *testing.T) {
	f := fakeModel(t, "llama", 8, 256, 8, 2, 32, 0, 1000)
	small := predict(t, f, Profile{Context: 4096})
	big := predict(t, f, Profile{Context: 8192})
	q8 := predict(t, f, Profile{Context: 8192, KVType: "q8_0"})
	if big.KVCache != 2*small.KVCache {
		t.Errorf("doubling context: KV %s → %s", small.KVCache, big.KVCache)
	}
	if q8.KVCache >= big.KVCache*6/10 || q8.KVCache <= big.KVCache/2 {
		t.Errorf("q8_0 KV %s vs f16 %s; want about 53%%", q8.KVCache, big.KVCache)
	}
	// Sliding-window layers stop growing once the context passes the window.
	g := fakeModel(t, "gemma3", 12, 256, 4, 1, 64, 512, 1000)
	g8, g32 := predict(t, g, Profile{Context: 8192}), predict(t, g, Profile{Context: 32768})
	if ratio := float64(g32.KVCache) / float64(g8.KVCache); ratio > 3.9 || ratio < 2 {
		t.Errorf("gemma3 KV ratio 32k/8k = %.2f; global layers grow 4×, local ones not at all", ratio)
	}
}

func TestOffloadSplitsCardAndHost(t *testing.T) {
	f := fakeModel(t, "llama", 10, 256, 8, 2, 32, 0, 1000)
	cal := mustCal(t)
	all, err := Predict(f, Profile{Name: "gpu", CardMemory: 8 * GiB, Context: 4096, OffloadLayers: OffloadAll}, RuntimeLlamaServer, cal)
	if err != nil {
		t.Fatal(err)
	}
	half, err := Predict(f, Profile{Name: "gpu", CardMemory: 8 * GiB, Context: 4096, OffloadLayers: 5}, RuntimeLlamaServer, cal)
	if err != nil {
		t.Fatal(err)
	}
	if half.Card >= all.Card || half.Host <= all.Host {
		t.Errorf("offloading 5 of 10 layers: card %s→%s host %s→%s", all.Card, half.Card, all.Host, half.Host)
	}
	if half.KVCache != all.KVCache || half.Weights != all.Weights {
		t.Errorf("placement changed totals: KV %s/%s weights %s/%s", half.KVCache, all.KVCache, half.Weights, all.Weights)
	}
}

func TestQuantPinMismatchIsAnError(t *testing.T) {
	b, err := gguf.Tiny(gguf.TinyOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(b), int64(len(b)), "tiny.gguf")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Predict(f, Profile{Name: "p", CardMemory: GiB, Context: 512, Quant: "Q4_K_M", Simulated: true}, RuntimeLlamaServer, mustCal(t))
	if err == nil || !strings.Contains(err.Error(), "Q4_K_M") || !strings.Contains(err.Error(), "tiny.gguf") {
		t.Errorf("got %v; want an error naming the file and both quants", err)
	}
}

func TestDecide(t *testing.T) {
	e := Estimate{Runtime: RuntimeLlamaServer, Card: 1000 * MiB, Peak: 1000 * MiB, RelError: 0.1}
	cases := []struct {
		card Size
		fits bool
		why  string
	}{
		{2 * GiB, true, "margin"},
		{1050 * MiB, false, "measured error"}, // 5% margin < 10% error
		{900 * MiB, false, "short"},
	}
	for _, c := range cases {
		p := Profile{Name: "sim", CardMemory: c.card, Context: 2048, Simulated: true}
		v := Decide(e, p, time.Unix(0, 0))
		if v.Fits != c.fits || !strings.Contains(v.Reason, c.why) {
			t.Errorf("card %s: fits=%v reason %q; want fits=%v and %q", c.card, v.Fits, v.Reason, c.fits, c.why)
		}
		if (v.Outcome == OutcomeFits) != v.Fits {
			t.Errorf("outcome %q disagrees with fits=%v", v.Outcome, v.Fits)
		}
		b, err := v.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Verdict
		if err := json.Unmarshal(b, &back); err != nil || back.Outcome != v.Outcome || back.Budget != c.card {
			t.Errorf("JSON round trip: %v %+v", err, back)
		}
		var out bytes.Buffer
		if err := v.Print(&out); err != nil || !strings.Contains(out.String(), v.Outcome) || !strings.Contains(out.String(), "bandwidth") {
			t.Errorf("print: %v\n%s", err, out.String())
		}
	}
}

func TestRunOnTinyModel(t *testing.T) {
	path := t.TempDir() + "/tiny.gguf"
	if err := gguf.WriteTiny(path, gguf.TinyOptions{Seed: 4}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	fits, err := Run(t.Context(), &out, path, Profile{Name: "sim-4g", CardMemory: 4 * GiB, Context: 2048, Simulated: true}, RuntimeLlamaServer, nil)
	if err != nil {
		t.Fatal(err)
	}
	tiny, err := Run(t.Context(), &out, path, Profile{Name: "sim-1m", CardMemory: MiB, Context: 2048, Simulated: true}, RuntimeLlamaServer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !fits.Fits || tiny.Fits {
		t.Errorf("tiny model: 4GiB fits=%v, 1MiB fits=%v\n%s", fits.Fits, tiny.Fits, out.String())
	}
}
