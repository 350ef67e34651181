package preflight

import (
	"errors"
	"fmt"
	"strings"

	"rig/internal/gguf"
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
	ContextLen int // trained context
	// ContextZero marks a file that states its trained context as 0 (the
	// key present, the value 0): ggml's own reader takes that as 0, not as
	// absent, and the preflight says so rather than check nothing silently.
	ContextZero bool
	KVHeads     []int // per layer; 0 marks a layer without attention (recurrent)
	KeyDim      int   // per head
	ValueDim    int   // per head
	SlidingWin  int   // 0 when no sliding-window attention
	SWALayers   []bool
	SSMStateB   uint64 // recurrent state bytes per layer per slot (f32), 0 when none
	FileType    string // the quant named by general.file_type, e.g. "Q4_K_M"
	TiedOutput  bool   // no output.weight: the embedding matrix is reused
}

// swaPeriods is llama.cpp's hard-coded local/global pattern for
// architectures whose files do not carry one: every n-th layer is global.
var swaPeriods = map[string]int{"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "llama4": 4}

// Bounds on what a GGUF may claim. They lie far above any real model (the
// largest have a few hundred layers, 128 heads, 2^14-wide embeddings and
// vocabularies of 2^18) and far below what makes the memory arithmetic or an
// allocation absurd, so a hostile or corrupt header is refused by name.
const (
	maxLayers   = 4096
	maxHeads    = 4096
	maxWidth    = 1 << 20 // embedding and feed-forward length, SSM inner size
	maxHeadDim  = 1 << 16 // key and value length per head
	maxContext  = 1 << 24
	maxVocab    = 1 << 22
	maxSSMState = 1 << 16 // ssm.state_size
	maxSSMConv  = 1 << 10 // ssm.conv_kernel
	maxSSMGroup = 1 << 12 // ssm.group_count
)

// ErrBadHParam marks a hyperparameter outside what the file and the
// architecture make possible.
var ErrBadHParam = errors.New("implausible hyperparameter")

// ReadHParams extracts the shapes; a missing required key, or a count or size
// outside what the file and the architecture make possible, is an error that
// names the file, the key, its value and the bound.
func ReadHParams(f *gguf.File) (HParams, error) {
	r := &hparamReader{f: f, h: HParams{Arch: f.Architecture()}}
	if r.h.Arch == "" {
		return r.h, fmt.Errorf("%s: general.architecture: missing (not a model file rig can size)", f.Path)
	}
	for _, step := range []func() error{r.shape, r.attention, r.slidingWindow, r.recurrentState, r.vocabulary} {
		if err := step(); err != nil {
			return r.h, err
		}
	}
	if ft, ok := f.Uint("general.file_type"); ok {
		r.h.FileType = gguf.FileTypeName(ft)
	}
	return r.h, nil
}

// hparamReader reads one file's hyperparameters into h, step by step, each
// key bounded as it is read.
type hparamReader struct {
	f *gguf.File
	h HParams
}

// key is a key under the architecture's prefix.
func (r *hparamReader) key(s string) string { return r.h.Arch + "." + s }

// bad is the error of a value outside what is possible.
func (r *hparamReader) bad(key string, v any, format string, a ...any) error {
	return fmt.Errorf("%s: %s = %v: %w: %s", r.f.Path, key, v, ErrBadHParam, fmt.Sprintf(format, a...))
}

// get reads an optional integer key and bounds it to lo..hi.
func (r *hparamReader) get(key string, lo, hi uint64) (int, bool, error) {
	raw, ok := r.f.Get(key)
	if !ok {
		return 0, false, nil
	}
	v, ok := gguf.AsUint(raw)
	if !ok {
		if isNegative(raw) {
			return 0, true, r.bad(key, raw, "negative")
		}
		return 0, true, fmt.Errorf("%s: %s: not an integer (rig cannot size this model)", r.f.Path, key)
	}
	if v < lo || v > hi {
		return 0, true, r.bad(key, v, "outside %d..%d", lo, hi)
	}
	return int(v), true, nil
}

// need reads a required integer key and bounds it to lo..hi.
func (r *hparamReader) need(key string, lo, hi uint64) (int, error) {
	v, ok, err := r.get(key, lo, hi)
	if err == nil && !ok {
		err = fmt.Errorf("%s: %s: missing or not an integer (rig cannot size this model)", r.f.Path, key)
	}
	return v, err
}

// shape reads the layer count, the widths and the trained context.
func (r *hparamReader) shape() error {
	h, f := &r.h, r.f
	var err error
	if h.Layers, err = r.need(r.key("block_count"), 1, maxLayers); err != nil {
		return err
	}
	// Every layer holds at least one tensor, so a file cannot describe more
	// layers than it has tensors.
	if h.Layers > len(f.Tensors) {
		return r.bad(r.key("block_count"), h.Layers, "more layers than the file's %d tensors", len(f.Tensors))
	}
	if h.Embd, err = r.need(r.key("embedding_length"), 1, maxWidth); err != nil {
		return err
	}
	ff, _, err := perLayer(f, r.key("feed_forward_length"), h.Layers, 0, maxWidth)
	if err != nil {
		return err
	}
	for _, n := range ff {
		h.FF = max(h.FF, n)
	}
	var stated bool
	h.ContextLen, stated, err = r.get(r.key("context_length"), 0, maxContext)
	h.ContextZero = stated && h.ContextLen == 0
	return err
}

// attention reads the heads per layer (query and key-value) and the head
// sizes.
func (r *hparamReader) attention() error {
	h, f := &r.h, r.f
	heads, ok, err := perLayer(f, r.key("attention.head_count"), h.Layers, 0, maxHeads)
	if err != nil {
		return err
	}
	for _, n := range heads {
		h.Heads = max(h.Heads, n)
	}
	if !ok || h.Heads == 0 {
		return r.bad(r.key("attention.head_count"), h.Heads, "missing or zero on every layer (must be 1..%d)", maxHeads)
	}
	h.KVHeads, ok, err = perLayer(f, r.key("attention.head_count_kv"), h.Layers, 0, uint64(h.Heads))
	if err != nil {
		return err
	}
	if !ok {
		h.KVHeads = make([]int, h.Layers)
		for i := range h.KVHeads {
			h.KVHeads[i] = h.Heads
		}
	}
	kd, kdOK, err := r.get(r.key("attention.key_length"), 1, maxHeadDim)
	if err != nil {
		return err
	}
	vd, vdOK, err := r.get(r.key("attention.value_length"), 1, maxHeadDim)
	if err != nil {
		return err
	}
	if (!kdOK || !vdOK) && h.Embd%h.Heads != 0 {
		// Without explicit head sizes the head dimension is embd/heads, which
		// the architecture requires to be whole.
		return r.bad(r.key("attention.head_count"), h.Heads, "does not divide %s = %d (and no key_length/value_length gives the head size)", r.key("embedding_length"), h.Embd)
	}
	h.KeyDim, h.ValueDim = h.Embd/h.Heads, h.Embd/h.Heads
	if h.KeyDim > maxHeadDim {
		return r.bad(r.key("attention.head_count"), h.Heads, "gives a head size of %d, above %d", h.KeyDim, maxHeadDim)
	}
	if kdOK {
		h.KeyDim = kd
	}
	if vdOK {
		h.ValueDim = vd
	}
	return nil
}

// slidingWindow reads the window and which layers use it: a per-layer
// pattern from the file, a period from the file, or llama.cpp's own period
// for the architecture (swaPeriods).
func (r *hparamReader) slidingWindow() error {
	h, f := &r.h, r.f
	winMax := uint64(maxContext)
	if h.ContextLen > 0 {
		winMax = uint64(h.ContextLen)
	}
	var err error
	if h.SlidingWin, _, err = r.get(r.key("attention.sliding_window"), 0, winMax); err != nil || h.SlidingWin == 0 {
		return err
	}
	h.SWALayers = make([]bool, h.Layers)
	patKey := r.key("attention.sliding_window_pattern")
	period := swaPeriods[h.Arch]
	pat, isSet := f.Get(patKey)
	var flags []any
	if isSet {
		if a, isArray := pat.([]any); isArray {
			if len(a) != h.Layers {
				return r.bad(patKey, fmt.Sprintf("[%d entries]", len(a)), "must have one entry per layer (%s = %d)", r.key("block_count"), h.Layers)
			}
			flags = a
		} else if period, _, err = r.get(patKey, 0, maxLayers); err != nil {
			return err
		}
	}
	for i := range h.SWALayers {
		switch {
		case flags != nil:
			b, isBool := flags[i].(bool)
			if !isBool {
				return r.bad(patKey, flags[i], "entry %d is not a bool", i)
			}
			h.SWALayers[i] = b
		case period > 1:
			h.SWALayers[i] = (i+1)%period != 0
		default:
			h.SWALayers[i] = true
		}
	}
	return nil
}

// recurrentState sizes a recurrent (SSM) layer's state per slot, when the
// model has one.
func (r *hparamReader) recurrentState() error {
	inner, hasSSM, err := r.get(r.key("ssm.inner_size"), 1, maxWidth)
	if err != nil || !hasSSM {
		return err
	}
	state, _, err := r.get(r.key("ssm.state_size"), 0, maxSSMState)
	if err != nil {
		return err
	}
	conv, _, err := r.get(r.key("ssm.conv_kernel"), 0, maxSSMConv)
	if err != nil {
		return err
	}
	groups, _, err := r.get(r.key("ssm.group_count"), 0, maxSSMGroup)
	if err != nil {
		return err
	}
	// conv state (conv-1) × (inner + 2·groups·state) and ssm state inner × state, f32.
	c := checked{}
	convW := c.add(uint64(inner), c.mul(2, uint64(groups), uint64(state)))
	r.h.SSMStateB = c.mul(4, c.add(c.mul(uint64(max(conv, 1)-1), convW), c.mul(uint64(inner), uint64(state))))
	if c.err != nil {
		return r.bad(r.key("ssm.inner_size"), inner, "the recurrent state size %v", c.err)
	}
	return nil
}

// vocabulary reads the vocabulary's size (the tokenizer's list, the
// architecture's key, or the embedding matrix) and whether the output matrix
// is the embedding's.
func (r *hparamReader) vocabulary() error {
	h, f := &r.h, r.f
	if v, ok := f.Get("tokenizer.ggml.tokens"); ok {
		if a, ok := v.([]string); ok {
			if len(a) > maxVocab {
				return r.bad("tokenizer.ggml.tokens", fmt.Sprintf("[%d entries]", len(a)), "more than %d tokens", maxVocab)
			}
			h.Vocab = len(a)
		}
	}
	if h.Vocab == 0 {
		var err error
		if h.Vocab, _, err = r.get(r.key("vocab_size"), 0, maxVocab); err != nil {
			return err
		}
	}
	h.TiedOutput = true
	for _, t := range f.Tensors {
		if t.Name == "output.weight" {
			h.TiedOutput = false
		}
		if h.Vocab == 0 && t.Name == "token_embd.weight" && len(t.Dims) == 2 {
			if t.Dims[1] > maxVocab {
				return r.bad("token_embd.weight.dims[1]", t.Dims[1], "a vocabulary of more than %d", maxVocab)
			}
			h.Vocab = int(t.Dims[1])
		}
	}
	return nil
}

func isNegative(v any) bool {
	switch x := v.(type) {
	case int8:
		return x < 0
	case int16:
		return x < 0
	case int32:
		return x < 0
	case int64:
		return x < 0
	}
	return false
}

// perLayer reads a key that is either one integer or an array of one per
// layer, each bounded to lo..hi; ok reports whether the key is present. The
// layer count must already be bounded: it sizes the result.
func perLayer(f *gguf.File, key string, layers int, lo, hi uint64) (out []int, ok bool, err error) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false, nil
	}
	bad := func(val any, format string, a ...any) error {
		return fmt.Errorf("%s: %s = %v: %w: %s", f.Path, key, val, ErrBadHParam, fmt.Sprintf(format, a...))
	}
	check := func(i int, n uint64, val any, neg bool) error {
		if neg {
			return bad(val, "layer %d is negative", i)
		}
		if n < lo || n > hi {
			return bad(val, "layer %d is outside %d..%d", i, lo, hi)
		}
		return nil
	}
	out = make([]int, layers)
	if n, isInt := gguf.AsUint(v); isInt {
		if n < lo || n > hi {
			return nil, true, bad(n, "outside %d..%d", lo, hi)
		}
		for i := range out {
			out[i] = int(n)
		}
		return out, true, nil
	}
	if isNegative(v) {
		return nil, true, bad(v, "negative")
	}
	var length int
	switch a := v.(type) {
	case []int32:
		length = len(a)
	case []uint32:
		length = len(a)
	default:
		return nil, true, fmt.Errorf("%s: %s: neither an integer nor an array of integers (rig cannot size this model)", f.Path, key)
	}
	if length != layers {
		return nil, true, bad(fmt.Sprintf("[%d entries]", length), "must have one entry per layer (%d)", layers)
	}
	for i := range out {
		var n uint64
		var val any
		neg := false
		switch a := v.(type) {
		case []int32:
			n, val, neg = uint64(a[i]), a[i], a[i] < 0
		case []uint32:
			n, val = uint64(a[i]), a[i]
		}
		if err := check(i, n, val, neg); err != nil {
			return nil, true, err
		}
		out[i] = int(n)
	}
	return out, true, nil
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
