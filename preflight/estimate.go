package preflight

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"rig/internal/gguf"
)

// Runtimes the memory model knows.
const (
	RuntimeLlamaServer = "llama-server"
	RuntimeOllama      = "ollama"
)

// Estimate is the predicted peak memory of one run at one profile, split by
// component and by placement.
type Estimate struct {
	Runtime   string `json:"runtime"`
	Model     string `json:"model"`
	Arch      string `json:"arch"`
	Profile   string `json:"profile"`
	Weights   Size   `json:"weights"`
	KVCache   Size   `json:"kv_cache"`
	Recurrent Size   `json:"recurrent_state"`
	Compute   Size   `json:"compute"`
	Output    Size   `json:"output"`
	Overhead  Size   `json:"overhead"`
	// Card is what must fit the card. On a simulated card the whole process
	// tree is held to the card's size, so Card is the whole peak.
	Card Size `json:"card"`
	Host Size `json:"host"`
	Peak Size `json:"peak"`

	KVCells    int      `json:"kv_cells"`
	SWACells   int      `json:"swa_cells,omitempty"`
	Layers     int      `json:"layers"`
	SWALayers  int      `json:"swa_layers,omitempty"`
	CardLayers int      `json:"card_layers"`
	RelError   float64  `json:"relative_error"` // the model's measured error for this runtime
	Calibrated string   `json:"calibrated"`     // date and machine of the constants
	Notes      []string `json:"notes,omitempty"`
}

// ErrNotModelled marks a model whose architecture the memory model does not
// know: sizing it as another would be a guess, so rig cannot decide.
var ErrNotModelled = errors.New("cannot decide")

// modelledArchs are the architectures whose memory the model below sizes:
// decoder-only attention with a per-layer KV cache (grouped-query, optionally
// sliding-window with the pattern in the file or in swaPeriods), and the
// hybrids whose recurrent layers carry a Mamba-style ssm.* state. Others
// (multi-head latent attention, short-convolution or linear-attention
// layers, encoders) are refused rather than sized as if they were these.
var modelledArchs = map[string]bool{
	"llama": true, "mistral": true, "qwen2": true, "qwen2moe": true, "qwen3": true, "qwen3moe": true,
	"gemma": true, "gemma2": true, "gemma3": true, "gemma3n": true, "cohere2": true, "llama4": true,
	"phi3": true, "granite": true, "granitemoe": true, "olmo": true, "olmo2": true, "starcoder2": true,
	"stablelm": true, "smollm3": true, "internlm2": true, "exaone": true,
	"granitehybrid": true, "jamba": true, "falcon-h1": true, "nemotron_h": true,
}

// Modelled reports whether the memory model sizes architecture arch.
func Modelled(arch string) bool { return modelledArchs[arch] }

// Predict sizes a run of the model in f at profile p on runtime rt.
func Predict(f *gguf.File, p Profile, rt string, cal *Calibration) (Estimate, error) {
	if err := p.Validate(); err != nil {
		return Estimate{}, err
	}
	rc, err := cal.For(CalibrationKey(rt, p.Backend))
	if err != nil {
		return Estimate{}, fmt.Errorf("%w: %w", ErrNotModelled, err)
	}
	h, err := ReadHParams(f)
	if err != nil {
		return Estimate{}, err
	}
	e := Estimate{Runtime: rt, Model: f.Path, Arch: h.Arch, Profile: p.Name, Layers: h.Layers, RelError: rc.RelError,
		Calibrated: cal.Date + " on " + cal.Machine}
	if p.Quant != "" && h.FileType != "" && !strings.EqualFold(p.Quant, h.FileType) {
		return e, fmt.Errorf("%s: profile %s: quant %q differs from the model file's %q (pins hold for the whole run; use the file of that quant or another arm)", f.Path, p.Name, p.Quant, h.FileType)
	}
	if rc.Runs == 0 {
		e.Notes = append(e.Notes, fmt.Sprintf("the %s overhead constants are first guesses, not measured (run rig bench preflight)", rt))
	}
	if h.ContextLen > 0 && p.Context > h.ContextLen {
		e.Notes = append(e.Notes, fmt.Sprintf("context %d is beyond the model's trained %d", p.Context, h.ContextLen))
	}

	if !Modelled(h.Arch) {
		return e, fmt.Errorf("%s: %w: architecture %q is not modelled (rig's memory model would size it as another architecture; it is not sized)", f.Path, ErrNotModelled, h.Arch)
	}
	e, err = size(f, p, rt, rc, h, e)
	if err != nil {
		return e, fmt.Errorf("%s: %s at context %d: %w", f.Path, h.Arch, p.Context, err)
	}
	return e, nil
}

// size is Predict's arithmetic, every step checked: an overflow is an error,
// never a wrapped-around small size.
func size(f *gguf.File, p Profile, rt string, rc RuntimeCalibration, h HParams, e Estimate) (Estimate, error) {
	c := &checked{}
	fail := func(what string) (Estimate, error) { return e, fmt.Errorf("%s: %w", what, c.err) }
	slots := p.Slots()
	cardLayers := h.Layers
	if !p.Simulated && p.OffloadLayers != OffloadAll {
		cardLayers = min(p.OffloadLayers, h.Layers)
	}
	e.CardLayers = cardLayers
	onCard := func(layer int) bool { return p.Simulated || layer < cardLayers }

	// Weights by placement: token embeddings stay on the host in llama.cpp;
	// the output head goes to the card only when every layer does.
	var wCard, wHost uint64
	for _, t := range f.Tensors {
		l := layerOf(t.Name)
		switch {
		case p.Simulated:
			wCard = c.add(wCard, t.Bytes())
		case l >= 0 && onCard(l):
			wCard = c.add(wCard, t.Bytes())
		case l < 0 && t.Name != "token_embd.weight" && cardLayers >= h.Layers:
			wCard = c.add(wCard, t.Bytes())
		default:
			wHost = c.add(wHost, t.Bytes())
		}
	}
	if dup := ollamaTiedCopy(f, h, rt); dup > 0 {
		// The copy is the output head: on the card only when every layer is.
		if p.Simulated || cardLayers >= h.Layers {
			wCard = c.add(wCard, dup)
		} else {
			wHost = c.add(wHost, dup)
		}
		e.Notes = append(e.Notes, fmt.Sprintf("Ollama's own engine holds a second copy of the tied embeddings for the output head (%s)", Size(dup)))
	}
	weights := c.add(wCard, wHost)
	if c.err != nil {
		return fail("weights")
	}
	e.Weights = Size(weights)

	// KV cache: layers × cells × kv_heads × (key_dim + value_dim) × bytes per element.
	kvt := p.KVGGMLType()
	if !kvt.Known() || kvt.BlockSize() == 0 {
		return e, fmt.Errorf("kv_type %s has no size", kvt)
	}
	runCtx := ollamaContext(h, rt, p.Context)
	if runCtx != p.Context {
		e.Notes = append(e.Notes, fmt.Sprintf("Ollama lowers context %d to the model's trained %d, so the run would not hold its pinned context", p.Context, runCtx))
	}
	ctxPad := c.int(rc.CtxPad)
	cells := c.padUp(c.mul(c.int(runCtx), c.int(slots)), ctxPad)
	var swaCells uint64
	if h.SlidingWin > 0 {
		swaCells = min(cells, c.padUp(c.add(c.mul(c.int(h.SlidingWin), c.int(slots)), c.int(rc.UBatch)), ctxPad))
	}
	if c.err != nil || cells > math.MaxInt {
		return fail("KV cells")
	}
	e.KVCells, e.SWACells = int(cells), int(swaCells)
	headElems := c.add(c.int(h.KeyDim), c.int(h.ValueDim))
	var kvCardElems, kvHostElems, rec uint64
	for l := 0; l < h.Layers; l++ {
		kvh := h.KVHeads[l]
		if kvh == 0 {
			rec = c.add(rec, c.mul(h.SSMStateB, c.int(slots)))
			continue
		}
		n := cells
		if h.SWALayers != nil && h.SWALayers[l] {
			n = swaCells
			e.SWALayers++
		}
		elems := c.mul(n, c.int(kvh), headElems)
		if onCard(l) {
			kvCardElems = c.add(kvCardElems, elems)
		} else {
			kvHostElems = c.add(kvHostElems, elems)
		}
	}
	kvBytes := func(elems uint64) uint64 {
		return c.mul(elems/kvt.BlockSize(), kvt.TypeSize()) + c.mul(elems%kvt.BlockSize(), kvt.TypeSize())/kvt.BlockSize()
	}
	kvCard, kvHost := kvBytes(kvCardElems), kvBytes(kvHostElems)
	e.KVCache = Size(c.add(kvCard, kvHost))
	e.Recurrent = Size(rec)
	if c.err != nil {
		return fail("KV cache and recurrent state")
	}

	// Compute buffer for one physical batch, as llama.cpp reserves it: the
	// feed-forward and residual activations of every token in the batch
	// (3·ff + 4·embd floats each, fitted to the logged buffers), the logits
	// of one output per slot, and the attention masks over the cells (f16
	// with flash attention); without flash attention the KQ matrix over all
	// cells for every head as well. The reserve is the worst case: a short
	// prompt touches only the mask rows of the cells in use.
	ub := min(c.int(rc.UBatch), cells)
	acts := c.mul(c.add(c.mul(3, c.int(h.FF)), c.mul(4, c.int(h.Embd))), ub, 4)
	logits := c.mul(c.int(h.Vocab), 4, c.int(slots))
	maskBytes := uint64(4)
	if rc.FlashAttention {
		maskBytes = 2
	}
	mask := c.mul(cells, ub, maskBytes)
	if h.SlidingWin > 0 {
		mask = c.add(mask, c.mul(swaCells, ub, maskBytes))
	}
	var attn uint64
	if !rc.FlashAttention {
		attn = c.mul(c.int(h.Heads), cells, ub, 4)
	}
	raw := c.add(acts, logits, mask, attn)
	if c.err != nil {
		return fail("compute buffer")
	}
	compute := c.add(c.float(rc.ComputeScale*float64(raw)), c.float(ollamaMaskBytes(h, rt, int(cells), int(swaCells), int(ub))))
	output := c.mul(c.int(h.Vocab), 4, c.int(slots))
	overhead := c.float(max(0, rc.BaseBytes+rc.PerVocabBytes*float64(h.Vocab)))
	if c.err != nil {
		return fail("compute buffer and overhead")
	}
	e.Compute, e.Output, e.Overhead = Size(compute), Size(output), Size(overhead)

	var card, host uint64
	if p.Simulated {
		card = c.add(weights, uint64(e.KVCache), rec, compute, output, overhead)
	} else {
		// A real card holds its layers, their cache and a compute buffer;
		// the host keeps the rest and the runtime itself.
		card = c.add(wCard, kvCard, rec, compute, c.float(rc.CardContextBytes))
		host = c.add(wHost, kvHost, output, overhead)
		if cardLayers < h.Layers {
			host = c.add(host, compute) // the CPU layers need their own buffer
		}
	}
	peak := c.add(card, host)
	if c.err == nil && peak > math.MaxInt64 {
		c.err = fmt.Errorf("%w: %d bytes in all", ErrOverflow, peak)
	}
	if c.err != nil {
		return fail("peak")
	}
	e.Card, e.Host, e.Peak = Size(card), Size(host), Size(peak)
	return e, nil
}
