package preflight

import (
	"fmt"
	"strings"
)

// HParams are the model shapes the memory model needs, read from GGUF
// metadata under the architecture's prefix.
type HParams struct {
	Arch       string
	Layers     int
	Embd       int
	FF         int
	Heads      int
	Vocab      int
	ContextLen int   // trained context
	KVHeads    []int // per layer; 0 marks a layer without attention (recurrent)
	KeyDim     int   // per head
	ValueDim   int   // per head
	SlidingWin int   // 0 when no sliding-window attention
	SWALayers  []bool
	SSMStateB  uint64 // recurrent state bytes per layer per slot (f32), 0 when none
	FileType   string // the quant named by general.file_type, e.g. "Q4_K_M"
	TiedOutput bool   // no output.weight: the embedding matrix is reused
}

// swaPeriods is llama.cpp's hard-coded local/global pattern for
// architectures whose files do not carry one: every n-th layer is global.
var swaPeriods = map[string]int{"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "llama4": 4}

// ReadHParams extracts the shapes; a missing required key is an error that
// names the file and the key.
func ReadHParams(f *File) (HParams, error) {
	h := HParams{Arch: f.Architecture()}
	if h.Arch == "" {
		return h, fmt.Errorf("%s: general.architecture: missing (not a model file rig can size)", f.Path)
	}
	k := func(s string) string { return h.Arch + "." + s }
	need := func(key string) (int, error) {
		v, ok := f.Uint(k(key))
		if !ok {
			return 0, fmt.Errorf("%s: %s: missing or not an integer (rig cannot size this model)", f.Path, k(key))
		}
		return int(v), nil
	}
	var err error
	if h.Layers, err = need("block_count"); err != nil {
		return h, err
	}
	if h.Embd, err = need("embedding_length"); err != nil {
		return h, err
	}
	if v, ok := f.Uint(k("feed_forward_length")); ok {
		h.FF = int(v)
	} else if v, ok := f.Get(k("feed_forward_length")); ok {
		if a, ok := v.([]int32); ok && len(a) > 0 {
			h.FF = int(a[0])
		}
	}
	if v, ok := f.Uint(k("context_length")); ok {
		h.ContextLen = int(v)
	}
	h.Heads = perLayerMax(f, k("attention.head_count"))
	h.KVHeads = perLayer(f, k("attention.head_count_kv"), h.Layers)
	if h.KVHeads == nil {
		h.KVHeads = make([]int, h.Layers)
		for i := range h.KVHeads {
			h.KVHeads[i] = h.Heads
		}
	}
	h.KeyDim, h.ValueDim = h.Embd/max(h.Heads, 1), h.Embd/max(h.Heads, 1)
	if v, ok := f.Uint(k("attention.key_length")); ok {
		h.KeyDim = int(v)
	}
	if v, ok := f.Uint(k("attention.value_length")); ok {
		h.ValueDim = int(v)
	}
	if v, ok := f.Uint(k("attention.sliding_window")); ok {
		h.SlidingWin = int(v)
	}
	if h.SlidingWin > 0 {
		h.SWALayers = make([]bool, h.Layers)
		period := swaPeriods[h.Arch]
		if v, ok := f.Uint(k("attention.sliding_window_pattern")); ok {
			period = int(v)
		}
		pat, isArray := f.Get(k("attention.sliding_window_pattern"))
		for i := range h.SWALayers {
			switch {
			case isArray:
				if a, ok := pat.([]any); ok && i < len(a) {
					b, _ := a[i].(bool)
					h.SWALayers[i] = b
				}
			case period > 1:
				h.SWALayers[i] = (i+1)%period != 0
			default:
				h.SWALayers[i] = true
			}
		}
	}
	if inner, ok := f.Uint(k("ssm.inner_size")); ok {
		state, _ := f.Uint(k("ssm.state_size"))
		conv, _ := f.Uint(k("ssm.conv_kernel"))
		groups, _ := f.Uint(k("ssm.group_count"))
		// conv state (conv-1) × (inner + 2·groups·state) and ssm state inner × state, f32.
		h.SSMStateB = 4 * ((max(conv, 1)-1)*(inner+2*groups*state) + inner*state)
	}
	if v, ok := f.Get("tokenizer.ggml.tokens"); ok {
		if a, ok := v.([]string); ok {
			h.Vocab = len(a)
		}
	}
	if h.Vocab == 0 {
		if v, ok := f.Uint(k("vocab_size")); ok {
			h.Vocab = int(v)
		}
	}
	h.TiedOutput = true
	for _, t := range f.Tensors {
		if t.Name == "output.weight" {
			h.TiedOutput = false
		}
		if h.Vocab == 0 && t.Name == "token_embd.weight" && len(t.Dims) == 2 {
			h.Vocab = int(t.Dims[1])
		}
	}
	if ft, ok := f.Uint("general.file_type"); ok {
		h.FileType = FileTypeName(ft)
	}
	if h.Layers <= 0 || h.Embd <= 0 || h.Heads <= 0 {
		return h, fmt.Errorf("%s: %s: block_count %d, embedding_length %d, head_count %d must be positive", f.Path, h.Arch, h.Layers, h.Embd, h.Heads)
	}
	return h, nil
}

// perLayer reads a key that is either one integer or an array per layer.
func perLayer(f *File, key string, layers int) []int {
	v, ok := f.Get(key)
	if !ok {
		return nil
	}
	out := make([]int, layers)
	if n, ok := asUint(v); ok {
		for i := range out {
			out[i] = int(n)
		}
		return out
	}
	switch a := v.(type) {
	case []int32:
		for i := range out {
			if i < len(a) {
				out[i] = int(a[i])
			}
		}
	case []uint32:
		for i := range out {
			if i < len(a) {
				out[i] = int(a[i])
			}
		}
	default:
		return nil
	}
	return out
}

func perLayerMax(f *File, key string) int {
	m := 0
	for _, n := range perLayer(f, key, 256) {
		m = max(m, n)
	}
	return m
}

// FileTypeName maps general.file_type (llama_ftype) to the quant name users pin.
func FileTypeName(ft uint64) string {
	names := map[uint64]string{
		0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
		10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
		16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
		22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
		28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
	}
	if n, ok := names[ft]; ok {
		return n
	}
	return fmt.Sprintf("file_type %d", ft)
}

// layerOf returns the block index of a tensor named blk.N.*, or -1.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	n := 0
	i := 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		n = n*10 + int(rest[i]-'0')
	}
	if i == 0 || i >= len(rest) || rest[i] != '.' {
		return -1
	}
	return n
}
