package preflight

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"rig/internal/gguf"
)

// encodeModel writes meta and n one-row tensors, one per layer.
func encodeModel(t testing.TB, meta []gguf.KV, n int) []byte {
	t.Helper()
	var ts []gguf.Tensor
	for l := 0; l < n; l++ {
		ts = append(ts, gguf.Tensor{Info: gguf.TensorInfo{Name: fmt.Sprintf("blk.%d.attn_q.weight", l), Dims: []uint64{32, 1}, Type: gguf.TypeQ8_0}, Data: make([]byte, 34)})
	}
	ts = append(ts, gguf.Tensor{Info: gguf.TensorInfo{Name: "token_embd.weight", Dims: []uint64{32, 8}, Type: gguf.TypeF16}, Data: make([]byte, 32*8*2)})
	var buf bytes.Buffer
	if err := gguf.Encode(&buf, meta, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readModel(t testing.TB, b []byte) *gguf.File {
	t.Helper()
	f, err := gguf.Read(bytes.NewReader(b), int64(len(b)), "hostile.gguf")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestHParamsRefuseImplausibleValues(t *testing.T) {
	const a = "llama"
	cases := []struct {
		name string
		set  []gguf.KV
		want []string // substrings of the error
	}{
		{"block_count 2^32-1", []gguf.KV{{Key: a + ".block_count", Type: gguf.ValueUint32, Value: uint32(math.MaxUint32)}}, []string{"llama.block_count = 4294967295", "1..4096"}},
		{"block_count 2^64-1", []gguf.KV{{Key: a + ".block_count", Type: gguf.ValueUint64, Value: uint64(math.MaxUint64)}}, []string{"llama.block_count = 18446744073709551615"}},
		{"block_count negative", []gguf.KV{{Key: a + ".block_count", Type: gguf.ValueInt32, Value: int32(-1)}}, []string{"llama.block_count = -1", "negative"}},
		{"block_count zero", []gguf.KV{{Key: a + ".block_count", Type: gguf.ValueUint32, Value: uint32(0)}}, []string{"llama.block_count = 0"}},
		{"more layers than tensors", []gguf.KV{{Key: a + ".block_count", Type: gguf.ValueUint32, Value: uint32(100)}}, []string{"llama.block_count = 100", "tensors"}},
		{"head_count 0", []gguf.KV{{Key: a + ".attention.head_count", Type: gguf.ValueUint32, Value: uint32(0)}}, []string{"llama.attention.head_count = 0"}},
		{"head_count huge", []gguf.KV{{Key: a + ".attention.head_count", Type: gguf.ValueUint32, Value: uint32(1 << 20)}}, []string{"llama.attention.head_count = 1048576", "0..4096"}},
		{"head_count does not divide embd", []gguf.KV{{Key: a + ".attention.head_count", Type: gguf.ValueUint32, Value: uint32(3)}, {Key: a + ".attention.head_count_kv", Type: gguf.ValueUint32, Value: uint32(1)}}, []string{"llama.attention.head_count = 3", "does not divide"}},
		{"head_count_kv above heads", []gguf.KV{{Key: a + ".attention.head_count_kv", Type: gguf.ValueUint32, Value: uint32(8)}}, []string{"llama.attention.head_count_kv = 8", "0..4"}},
		{"head_count_kv short array", []gguf.KV{{Key: a + ".attention.head_count_kv", Type: gguf.ValueArray, Value: []uint32{2, 2, 2}}}, []string{"llama.attention.head_count_kv = [3 entries]", "one entry per layer (4)"}},
		{"head_count_kv negative entry", []gguf.KV{{Key: a + ".attention.head_count_kv", Type: gguf.ValueArray, Value: []int32{2, -1, 2, 2}}}, []string{"llama.attention.head_count_kv = -1", "layer 1 is negative"}},
		{"embedding_length huge", []gguf.KV{{Key: a + ".embedding_length", Type: gguf.ValueUint64, Value: uint64(1 << 40)}}, []string{"llama.embedding_length = 1099511627776"}},
		{"feed_forward_length huge", []gguf.KV{{Key: a + ".feed_forward_length", Type: gguf.ValueUint32, Value: uint32(1 << 31)}}, []string{"llama.feed_forward_length = 2147483648"}},
		{"context_length huge", []gguf.KV{{Key: a + ".context_length", Type: gguf.ValueUint64, Value: uint64(1 << 40)}}, []string{"llama.context_length = 1099511627776", "0..16777216"}},
		{"vocab_size huge", []gguf.KV{{Key: a + ".vocab_size", Type: gguf.ValueUint32, Value: uint32(1 << 30)}}, []string{"llama.vocab_size = 1073741824"}},
		{"key_length zero", []gguf.KV{{Key: a + ".attention.key_length", Type: gguf.ValueUint32, Value: uint32(0)}}, []string{"llama.attention.key_length = 0"}},
		{"value_length huge", []gguf.KV{{Key: a + ".attention.value_length", Type: gguf.ValueUint32, Value: uint32(1 << 30)}}, []string{"llama.attention.value_length = 1073741824"}},
		{"sliding_window beyond context", []gguf.KV{{Key: a + ".attention.sliding_window", Type: gguf.ValueUint32, Value: uint32(8192)}}, []string{"llama.attention.sliding_window = 8192", "0..4096"}},
		{"sliding_window_pattern huge", []gguf.KV{{Key: a + ".attention.sliding_window", Type: gguf.ValueUint32, Value: uint32(512)}, {Key: a + ".attention.sliding_window_pattern", Type: gguf.ValueUint32, Value: uint32(1 << 20)}}, []string{"llama.attention.sliding_window_pattern = 1048576"}},
		{"ssm inner huge", []gguf.KV{{Key: a + ".ssm.inner_size", Type: gguf.ValueUint64, Value: uint64(1 << 62)}}, []string{"llama.ssm.inner_size = 4611686018427387904"}},
		{"ssm state huge", []gguf.KV{{Key: a + ".ssm.inner_size", Type: gguf.ValueUint32, Value: uint32(128)}, {Key: a + ".ssm.state_size", Type: gguf.ValueUint32, Value: uint32(math.MaxUint32)}}, []string{"llama.ssm.state_size = 4294967295"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := readModel(t, encodeModel(t, gguf.PlausibleMeta(a, c.set...), 4))
			_, err := ReadHParams(f)
			if err == nil {
				t.Fatal("read; want a refusal")
			}
			for _, w := range append(c.want, "hostile.gguf") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			// Predict refuses the same way and never returns an estimate to decide on.
			if _, perr := Predict(f, Profile{Name: "p", CardMemory: 8 * GiB, Context: 4096, Simulated: true}, RuntimeLlamaServer, mustCal(t)); perr == nil {
				t.Error("Predict sized a model whose hyperparameters were refused")
			}
		})
	}
}

func TestHParamsAcceptPerLayerArrays(t *testing.T) {
	f := readModel(t, encodeModel(t, gguf.PlausibleMeta("llama",
		gguf.KV{Key: "llama.attention.head_count_kv", Type: gguf.ValueArray, Value: []int32{2, 0, 2, 1}},
		gguf.KV{Key: "llama.feed_forward_length", Type: gguf.ValueArray, Value: []uint32{128, 256, 128, 128}}), 4))
	h, err := ReadHParams(f)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(h.KVHeads) != "[2 0 2 1]" || h.FF != 256 {
		t.Errorf("kv heads %v, ff %d", h.KVHeads, h.FF)
	}
}

func TestUnknownArchitectureCannotBeDecided(t *testing.T) {
	f := readModel(t, encodeModel(t, gguf.PlausibleMeta("rwkv6"), 4))
	if _, err := ReadHParams(f); err != nil {
		t.Fatalf("shapes of an unknown architecture still read: %v", err)
	}
	for _, rt := range []string{RuntimeLlamaServer, RuntimeOllama} {
		_, err := Predict(f, Profile{Name: "p", CardMemory: 8 * GiB, Context: 2048, Simulated: true}, rt, mustCal(t))
		if !errors.Is(err, ErrNotModelled) || !strings.Contains(err.Error(), `cannot decide: architecture "rwkv6" is not modelled`) {
			t.Errorf("%s: got %v; want cannot decide: architecture rwkv6 is not modelled", rt, err)
		}
	}
	path := t.TempDir() + "/rwkv.gguf"
	b := encodeModel(t, gguf.PlausibleMeta("rwkv6"), 4)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := Run(t.Context(), &bytes.Buffer{}, path, Profile{Name: "p", CardMemory: 8 * GiB, Context: 2048, Simulated: true}, RuntimeLlamaServer, nil)
	if err == nil || v.Fits || v.Outcome == OutcomeFits {
		t.Errorf("rig preflight on an unknown architecture: %+v, %v", v, err)
	}
}

func TestEstimateOverflowIsAnError(t *testing.T) {
	const a = "llama"
	meta := gguf.PlausibleMeta(a,
		gguf.KV{Key: a + ".block_count", Type: gguf.ValueUint32, Value: uint32(4096)},
		gguf.KV{Key: a + ".embedding_length", Type: gguf.ValueUint32, Value: uint32(4096)},
		gguf.KV{Key: a + ".context_length", Type: gguf.ValueUint32, Value: uint32(1 << 24)},
		gguf.KV{Key: a + ".attention.head_count", Type: gguf.ValueUint32, Value: uint32(4096)},
		gguf.KV{Key: a + ".attention.head_count_kv", Type: gguf.ValueUint32, Value: uint32(4096)},
		gguf.KV{Key: a + ".attention.key_length", Type: gguf.ValueUint32, Value: uint32(1 << 16)},
		gguf.KV{Key: a + ".attention.value_length", Type: gguf.ValueUint32, Value: uint32(1 << 16)},
	)
	f := readModel(t, encodeModel(t, meta, 4096))
	if _, err := ReadHParams(f); err != nil {
		t.Fatalf("every value is within its bound: %v", err)
	}
	e, err := Predict(f, Profile{Name: "p", CardMemory: 8 * GiB, Context: 1 << 24, Parallel: 256, KVType: "f32", Simulated: true}, RuntimeLlamaServer, mustCal(t))
	if !errors.Is(err, ErrOverflow) || !strings.Contains(err.Error(), "KV cache") {
		t.Fatalf("got %v (estimate %s); want an overflow error naming the KV cache", err, e.Card)
	}
}

func TestDecideNeverFitsAnAbsurdEstimate(t *testing.T) {
	for _, card := range []Size{math.MaxInt64 + 1, math.MaxUint64} {
		v := Decide(Estimate{Card: card, Peak: card, RelError: 0.07}, Profile{Name: "p", CardMemory: TiB, Context: 1, Simulated: true}, time.Unix(0, 0))
		if v.Fits || v.Outcome == OutcomeFits || v.Margin >= 0 {
			t.Errorf("card %d: %+v", uint64(card), v)
		}
	}
}

// FuzzPredict runs the whole path, header to verdict, on any bytes. On every
// input: no panic and bounded memory (every count is bounded before it sizes
// anything); a prediction holds at least the tensor data, and never shrinks as
// the context grows.
func FuzzPredict(f *testing.F) {
	for _, o := range []gguf.TinyOptions{{Seed: 1, Layers: 1, Embd: 32, Heads: 2, KVHeads: 1, FF: 32}, {Seed: 2}} {
		b, err := gguf.Tiny(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint32(2048), uint32(4096), uint8(1), true, false)
	}
	const a = "llama"
	for _, set := range [][]gguf.KV{
		nil,
		{{Key: a + ".block_count", Type: gguf.ValueUint32, Value: uint32(math.MaxUint32)}},
		{{Key: a + ".attention.head_count", Type: gguf.ValueUint32, Value: uint32(0)}},
		{{Key: a + ".context_length", Type: gguf.ValueUint64, Value: uint64(math.MaxUint64)}},
		{{Key: a + ".attention.sliding_window", Type: gguf.ValueUint32, Value: uint32(512)}},
		{{Key: a + ".attention.head_count_kv", Type: gguf.ValueArray, Value: []int32{2, 0, 2, 2}}, {Key: a + ".ssm.inner_size", Type: gguf.ValueUint32, Value: uint32(128)}, {Key: a + ".ssm.state_size", Type: gguf.ValueUint32, Value: uint32(16)}, {Key: a + ".ssm.conv_kernel", Type: gguf.ValueUint32, Value: uint32(4)}},
		{{Key: "general.architecture", Type: gguf.ValueString, Value: "rwkv6"}},
	} {
		f.Add(encodeModel(f, gguf.PlausibleMeta(a, set...), 4), uint32(1<<24), uint32(7), uint8(255), false, true)
	}
	cal, err := DefaultCalibration()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, c1, c2 uint32, np uint8, sim, ollama bool) {
		g, err := gguf.Read(bytes.NewReader(data), int64(len(data)), "fuzz.gguf")
		if err != nil {
			return
		}
		if h, err := ReadHParams(g); err == nil && (h.Layers > maxLayers || len(h.KVHeads) != h.Layers || len(h.SWALayers) > maxLayers) {
			t.Fatalf("unbounded shapes: %d layers, %d kv heads", h.Layers, len(h.KVHeads))
		}
		rt := RuntimeLlamaServer
		if ollama {
			rt = RuntimeOllama
		}
		ctx1 := 1 + int(c1%maxContext)
		ctx2 := ctx1 + int(c2%uint32(maxContext-ctx1+1))
		p := Profile{Name: "fuzz", CardMemory: 8 * GiB, Context: ctx1, Parallel: int(np%8) + 1, Simulated: sim, OffloadLayers: OffloadAll}
		if !sim {
			p.OffloadLayers = int(np % 5)
		}
		e1, err1 := Predict(g, p, rt, cal)
		p2 := p
		p2.Context = ctx2
		e2, err2 := Predict(g, p2, rt, cal)
		if err2 == nil && err1 != nil {
			t.Fatalf("context %d sized but the smaller %d did not: %v", ctx2, ctx1, err1)
		}
		if err1 != nil {
			return
		}
		if uint64(e1.Peak) < g.TensorBytes() {
			t.Fatalf("predicted %d bytes, less than the %d of tensor data", uint64(e1.Peak), g.TensorBytes())
		}
		if e1.Peak != e1.Card+e1.Host {
			t.Fatalf("peak %d is not card %d + host %d", e1.Peak, e1.Card, e1.Host)
		}
		v := Decide(e1, p, time.Unix(0, 0))
		if v.Fits && (e1.Card > p.CardMemory || v.Outcome != OutcomeFits) {
			t.Fatalf("fits with %s on a %s card (%s)", e1.Card, p.CardMemory, v.Outcome)
		}
		if err2 != nil {
			if !errors.Is(err2, ErrOverflow) {
				t.Fatalf("context %d: %v, where %d sized", ctx2, err2, ctx1)
			}
			return
		}
		if e2.Peak < e1.Peak || e2.Card < e1.Card || e2.KVCache < e1.KVCache {
			t.Fatalf("context %d → %d: peak %d → %d, card %d → %d", ctx1, ctx2, e1.Peak, e2.Peak, e1.Card, e2.Card)
		}
	})
}
