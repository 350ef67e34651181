package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
)

// TinyOptions shapes a tiny random-weight llama model. Zero fields take the
// defaults noted; Seed picks the weights, so two seeds give two different
// models (different sha256, different log-probabilities).
type TinyOptions struct {
	Seed    uint64
	Layers  int // 2
	Embd    int // 64
	Heads   int // 4
	KVHeads int // 2
	FF      int // 128
	Context int // 2048 (llama.context_length)
	// ChatTemplate, when set, is written as tokenizer.chat_template: a
	// runtime's launcher refuses a model that names no chat format.
	ChatTemplate string
}

func (o TinyOptions) withDefaults() TinyOptions {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Layers, 2)
	def(&o.Embd, 64)
	def(&o.Heads, 4)
	def(&o.KVHeads, 2)
	def(&o.FF, 128)
	def(&o.Context, 2048)
	return o
}

// Tiny returns a small deterministic llama-architecture GGUF model with a
// SentencePiece-style vocabulary (control tokens, the 128 ASCII byte tokens
// and a few words) that llama.cpp loads and runs. Byte tokens stop at 0x7F so
// any sampled sequence is valid UTF-8 (llama-server rejects output that is
// not); prompts must therefore be ASCII. Weights are F32 norms, F16
// attention and embeddings and Q8_0 feed-forward, so a reader sees three
// tensor types. It is for tests of code that needs a real model file; the
// model's output is noise.
func Tiny(opts TinyOptions) ([]byte, error) {
	o := opts.withDefaults()
	if o.Embd%o.Heads != 0 || o.Heads%o.KVHeads != 0 || o.Embd%32 != 0 || o.FF%32 != 0 {
		return nil, fmt.Errorf("gguf: tiny model: embd %d must be a multiple of 32 and of heads %d, heads of kv heads %d, ff %d a multiple of 32", o.Embd, o.Heads, o.KVHeads, o.FF)
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	tokens, scores, types := tinyVocab()
	nVocab := uint64(len(tokens))
	headDim := o.Embd / o.Heads
	kvDim := uint64(headDim * o.KVHeads)
	embd, ff := uint64(o.Embd), uint64(o.FF)

	meta := tinyMeta(o, headDim, tokens, scores, types)

	norm := func(name string) Tensor {
		v := make([]float32, embd)
		for i := range v {
			v[i] = 1 + float32(rng.NormFloat64()*0.01)
		}
		return Tensor{TensorInfo{Name: name, Dims: []uint64{embd}, Type: TypeF32}, f32Bytes(v)}
	}
	mat := func(name string, t GGMLType, cols, rows uint64) Tensor {
		v := make([]float32, cols*rows)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.05)
		}
		var data []byte
		switch t {
		case TypeF16:
			data = f16Bytes(v)
		case TypeQ8_0:
			data = q8_0Bytes(v)
		default:
			data = f32Bytes(v)
		}
		return Tensor{TensorInfo{Name: name, Dims: []uint64{cols, rows}, Type: t}, data}
	}
	ts := []Tensor{
		mat("token_embd.weight", TypeF16, embd, nVocab),
		norm("output_norm.weight"),
		mat("output.weight", TypeF16, embd, nVocab),
	}
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			norm(p+"attn_norm.weight"),
			mat(p+"attn_q.weight", TypeF16, embd, embd),
			mat(p+"attn_k.weight", TypeF16, embd, kvDim),
			mat(p+"attn_v.weight", TypeF16, embd, kvDim),
			mat(p+"attn_output.weight", TypeF16, embd, embd),
			norm(p+"ffn_norm.weight"),
			mat(p+"ffn_gate.weight", TypeQ8_0, embd, ff),
			mat(p+"ffn_up.weight", TypeQ8_0, embd, ff),
			mat(p+"ffn_down.weight", TypeQ8_0, ff, embd),
		)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, meta, ts); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tinyMeta is the tiny model's metadata: a llama architecture of o's sizes
// and the vocabulary tinyVocab makes.
func tinyMeta(o TinyOptions, headDim int, tokens []string, scores []float32, types []int32) []KV {
	meta := []KV{
		{"general.architecture", ValueString, "llama"},
		{"general.name", ValueString, fmt.Sprintf("rig-tiny-seed-%d", o.Seed)},
		{"general.file_type", ValueUint32, uint32(1)},
		{"general.alignment", ValueUint32, uint32(32)},
		{"llama.context_length", ValueUint32, uint32(o.Context)},
		{"llama.embedding_length", ValueUint32, uint32(o.Embd)},
		{"llama.block_count", ValueUint32, uint32(o.Layers)},
		{"llama.feed_forward_length", ValueUint32, uint32(o.FF)},
		{"llama.attention.head_count", ValueUint32, uint32(o.Heads)},
		{"llama.attention.head_count_kv", ValueUint32, uint32(o.KVHeads)},
		{"llama.rope.dimension_count", ValueUint32, uint32(headDim)},
		{"llama.rope.freq_base", ValueFloat32, float32(10000)},
		{"llama.attention.layer_norm_rms_epsilon", ValueFloat32, float32(1e-5)},
		{"llama.vocab_size", ValueUint32, uint32(len(tokens))},
		{"tokenizer.ggml.model", ValueString, "llama"},
		{"tokenizer.ggml.tokens", ValueArray, tokens},
		{"tokenizer.ggml.scores", ValueArray, scores},
		{"tokenizer.ggml.token_type", ValueArray, types},
		{"tokenizer.ggml.unknown_token_id", ValueUint32, uint32(0)},
		{"tokenizer.ggml.bos_token_id", ValueUint32, uint32(1)},
		{"tokenizer.ggml.eos_token_id", ValueUint32, uint32(2)},
		{"tokenizer.ggml.add_bos_token", ValueBool, true},
	}
	if o.ChatTemplate != "" {
		meta = append(meta, KV{"tokenizer.chat_template", ValueString, o.ChatTemplate})
	}
	return meta
}

// WriteTiny writes Tiny(opts) to path.
func WriteTiny(path string, opts TinyOptions) error {
	b, err := Tiny(opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("gguf: write tiny model: %w", err)
	}
	return nil
}

// tinyVocab is a SentencePiece vocabulary: llama.cpp's SPM tokenizer needs
// <unk>, <s>, </s> and byte tokens (it looks up "\n" as a byte at load).
func tinyVocab() ([]string, []float32, []int32) {
	const (
		normal  = 1
		unknown = 2
		control = 3
		byteTok = 6
	)
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{unknown, control, control}
	for b := 0; b < 128; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, byteTok)
	}
	for c := 'a'; c <= 'z'; c++ {
		tokens = append(tokens, string(c), "\u2581"+string(c))
		types = append(types, normal, normal)
	}
	for _, w := range []string{"\u2581the", "\u2581and", "\u2581is", "\u2581of", "\u2581to", "\u2581in", "\u2581hello", "\u2581world", "\u2581", "."} {
		tokens = append(tokens, w)
		types = append(types, normal)
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(i)
	}
	return tokens, scores, types
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func f16Bytes(v []float32) []byte {
	b := make([]byte, 0, 2*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint16(b, f16(f))
	}
	return b
}

// f16 converts to IEEE half precision, rounding to nearest; the tiny model's
// weights are small normal numbers, so subnormals flush to zero.
func f16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int32(bits>>23&0xff) - 127 + 15
	mant := bits & 0x7fffff
	switch {
	case exp <= 0:
		return sign
	case exp >= 31:
		return sign | 0x7c00
	}
	h := uint32(exp)<<10 | mant>>13
	if mant&0x1000 != 0 {
		h++ // may carry into the exponent, which is still correct rounding
	}
	return sign | uint16(h)
}

// q8_0Bytes quantises rows of 32 values: an f16 scale then 32 int8s.
func q8_0Bytes(v []float32) []byte {
	b := make([]byte, 0, len(v)/32*34)
	for i := 0; i < len(v); i += 32 {
		blk := v[i : i+32]
		var amax float32
		for _, x := range blk {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		d := amax / 127
		b = binary.LittleEndian.AppendUint16(b, f16(d))
		for _, x := range blk {
			var q int8
			if d != 0 {
				q = int8(math.Round(float64(x / d)))
			}
			b = append(b, byte(q))
		}
	}
	return b
}

// PlausibleMeta is the metadata of a small, plausible header of architecture
// arch (4 layers, 64-wide, a 1000-token vocabulary); set replaces or adds
// keys. rig's tests and its hostile-input corpus build their GGUF cases on it,
// so a case differs from a valid header only where it means to.
func PlausibleMeta(arch string, set ...KV) []KV {
	meta := []KV{
		{"general.architecture", ValueString, arch},
		{arch + ".block_count", ValueUint32, uint32(4)},
		{arch + ".embedding_length", ValueUint32, uint32(64)},
		{arch + ".feed_forward_length", ValueUint32, uint32(128)},
		{arch + ".context_length", ValueUint32, uint32(4096)},
		{arch + ".attention.head_count", ValueUint32, uint32(4)},
		{arch + ".attention.head_count_kv", ValueUint32, uint32(2)},
		{arch + ".vocab_size", ValueUint32, uint32(1000)},
	}
	for _, kv := range set {
		replaced := false
		for i := range meta {
			if meta[i].Key == kv.Key {
				meta[i], replaced = kv, true
			}
		}
		if !replaced {
			meta = append(meta, kv)
		}
	}
	return meta
}

// LargeHeader is a valid llama GGUF with a large header and tiny tensors:
// 200 layers with three tensors each, a 4000-token vocabulary and 200 extra
// keys. BenchmarkPreflightCorpus times the preflight on it, and the hostile
// corpus keeps it as its largest valid case.
func LargeHeader() ([]byte, error) {
	const layers = 200
	tokens := make([]string, 4000)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("tok%d", i)
	}
	meta := PlausibleMeta("llama",
		KV{"general.file_type", ValueUint32, uint32(7)},
		KV{"llama.block_count", ValueUint32, uint32(layers)},
		KV{"llama.vocab_size", ValueUint32, uint32(len(tokens))},
		KV{"tokenizer.ggml.tokens", ValueArray, tokens})
	for i := 0; i < 200; i++ {
		meta = append(meta, KV{fmt.Sprintf("corpus.extra.%03d", i), ValueUint32, uint32(i)})
	}
	var ts []Tensor
	for l := 0; l < layers; l++ {
		for _, n := range []string{"attn_q", "attn_k", "attn_v"} {
			ts = append(ts, Tensor{Info: TensorInfo{Name: fmt.Sprintf("blk.%d.%s.weight", l, n), Dims: []uint64{32, 1}, Type: TypeQ8_0}, Data: make([]byte, 34)})
		}
	}
	ts = append(ts, Tensor{Info: TensorInfo{Name: "token_embd.weight", Dims: []uint64{32, 8}, Type: TypeF16}, Data: make([]byte, 32*8*2)})
	var buf bytes.Buffer
	if err := Encode(&buf, meta, ts); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
