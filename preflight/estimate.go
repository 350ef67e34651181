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
	// ModelCopy is page cache a simulated card is charged for beside Peak:
	// Ollama's copy of the model file, written inside the card's reservation
	// (see ollamaModelCopy). The kernel reclaims it before it would kill the
	// run, so it is not part of what must fit; a reservation with room reads
	// it in its peak (ReservationPeak).
	ModelCopy Size `json:"model_copy,omitempty"`

	KVCells    int      `json:"kv_cells"`
	SWACells   int      `json:"swa_cells,omitempty"`
	Layers     int      `json:"layers"`
	SWALayers  int      `json:"swa_layers,omitempty"`
	CardLayers int      `json:"card_layers"`
	RelError   float64  `json:"relative_error"` // the model's measured error for this runtime
	Calibrated string   `json:"calibrated"`     // date and machine of the constants
	Notes      []string `json:"notes,omitempty"`
}

// ReservationPeak is the peak a study trial's reservation reads when it has
// room: Peak and the reclaimable ModelCopy. It is the figure a report's peak
// memory shows for the arm.
func (e Estimate) ReservationPeak() Size { return e.Peak + e.ModelCopy }

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
	rc, err := serverSizing, error(nil)
	if rt != RuntimeOpenAIServer {
		if rc, err = cal.For(CalibrationKey(rt, p.Backend)); err != nil {
			return Estimate{}, fmt.Errorf("%w: %w", ErrNotModelled, err)
		}
	}
	h, err := ReadHParams(f)
	if err != nil {
		return Estimate{}, err
	}
	e := Estimate{Runtime: rt, Model: f.Path, Arch: h.Arch, Profile: p.Name, Layers: h.Layers, RelError: rc.RelError}
	if cal != nil {
		e.Calibrated = cal.Date + " on " + cal.Machine
	}
	if p.Quant != "" && h.FileType != "" && !strings.EqualFold(p.Quant, h.FileType) {
		return e, fmt.Errorf("%s: profile %s: quant %q differs from the model file's %q (pins hold for the whole run; use the file of that quant or another arm)", f.Path, p.Name, p.Quant, h.FileType)
	}
	if rc.Runs == 0 && rt != RuntimeOpenAIServer {
		e.Notes = append(e.Notes, fmt.Sprintf("the %s overhead constants are first guesses, not measured (run rig bench preflight)", rt))
	}
	if h.ContextLen > 0 && p.Context > h.ContextLen {
		e.Notes = append(e.Notes, fmt.Sprintf("context %d is beyond the model's trained %d", p.Context, h.ContextLen))
	}
	if h.ContextZero {
		e.Notes = append(e.Notes, fmt.Sprintf("the model file states a trained context of 0 (%s.context_length): rig cannot check context %d against it, and a runtime may read the 0 its own way", h.Arch, p.Context))
	}

	if !Modelled(h.Arch) {
		return e, fmt.Errorf("%s: %w: architecture %q is not modelled (rig's memory model would size it as another architecture; it is not sized)", f.Path, ErrNotModelled, h.Arch)
	}
	if rt == RuntimeOpenAIServer {
		e, err = sizeServer(f, p, h, e)
	} else {
		e, err = size(f, p, rt, rc, h, e)
	}
	if err != nil {
		return e, fmt.Errorf("%s: %s at context %d: %w", f.Path, h.Arch, p.Context, err)
	}
	return e, nil
}

// size is Predict's arithmetic, every step checked: an overflow is an error,
// never a wrapped-around small size. On an error the estimate holds what was
// sized before it.
func size(f *gguf.File, p Profile, rt string, rc RuntimeCalibration, h HParams, e Estimate) (Estimate, error) {
	s := &sizing{p: p, rt: rt, rc: rc, h: h, e: e, slots: p.Slots(), cardLayers: h.Layers}
	if !p.Simulated && p.OffloadLayers != OffloadAll {
		s.cardLayers = min(p.OffloadLayers, h.Layers)
	}
	s.e.CardLayers = s.cardLayers
	w, err := s.weights(f)
	if err != nil {
		return s.e, err
	}
	kv, err := s.kvCache()
	if err != nil {
		return s.e, err
	}
	if err := s.buffers(); err != nil {
		return s.e, err
	}
	if err := s.place(w, kv); err != nil {
		return s.e, err
	}
	if cp := ollamaModelCopy(f, rt, p); cp > 0 {
		s.e.ModelCopy = Size(cp)
		s.e.Notes = append(s.e.Notes, fmt.Sprintf("a reservation with room reads a peak of about %s (±%.0f%%): the %s needed and Ollama's copy of the model file (%s), which rig's launcher writes into Ollama's blob store inside the card; the kernel reclaims that page cache before it would kill the run, so it is not part of what must fit",
			s.e.ReservationPeak(), 100*rc.RelError, s.e.Peak, s.e.ModelCopy))
	}
	return s.e, nil
}

// sizing is one prediction being sized: the inputs, the estimate filled in
// step by step, and the checked arithmetic's first overflow.
type sizing struct {
	c          checked
	p          Profile
	rt         string
	rc         RuntimeCalibration
	h          HParams
	e          Estimate
	slots      int
	cardLayers int // layers on the card: all of them on a simulated card
}

// split is a size by placement.
type split struct{ card, host uint64 }

func (s *sizing) onCard(layer int) bool { return s.p.Simulated || layer < s.cardLayers }

func (s *sizing) fail(what string) error { return fmt.Errorf("%s: %w", what, s.c.err) }

// weights sizes the tensors by placement: token embeddings stay on the host
// in llama.cpp; the output head goes to the card only when every layer does.
func (s *sizing) weights(f *gguf.File) (split, error) {
	c, allOnCard := &s.c, s.cardLayers >= s.h.Layers
	var w split
	for _, t := range f.Tensors {
		l := layerOf(t.Name)
		switch {
		case s.p.Simulated:
			w.card = c.add(w.card, t.Bytes())
		case l >= 0 && s.onCard(l):
			w.card = c.add(w.card, t.Bytes())
		case l < 0 && t.Name != "token_embd.weight" && allOnCard:
			w.card = c.add(w.card, t.Bytes())
		default:
			w.host = c.add(w.host, t.Bytes())
		}
	}
	if dup := ollamaTiedCopy(f, s.h, s.rt); dup > 0 {
		// The copy is the output head: on the card only when every layer is.
		if s.p.Simulated || allOnCard {
			w.card = c.add(w.card, dup)
		} else {
			w.host = c.add(w.host, dup)
		}
		s.e.Notes = append(s.e.Notes, fmt.Sprintf("Ollama's own engine holds a second copy of the tied embeddings for the output head (%s)", Size(dup)))
	}
	weights := c.add(w.card, w.host)
	if c.err != nil {
		return w, s.fail("weights")
	}
	s.e.Weights = Size(weights)
	return w, nil
}

// cells counts the KV cells: the context of every slot, padded as the
// runtime pads it, and the sliding-window layers' fewer cells.
func (s *sizing) cells() (cells, swaCells uint64, err error) {
	c := &s.c
	runCtx := ollamaContext(s.h, s.rt, s.p.Context)
	if runCtx != s.p.Context {
		s.e.Notes = append(s.e.Notes, fmt.Sprintf("Ollama lowers context %d to the model's trained %d, so the run would not hold its pinned context", s.p.Context, runCtx))
	}
	ctxPad := c.int(s.rc.CtxPad)
	cells = c.padUp(c.mul(c.int(runCtx), c.int(s.slots)), ctxPad)
	if s.h.SlidingWin > 0 {
		swaCells = min(cells, c.padUp(c.add(c.mul(c.int(s.h.SlidingWin), c.int(s.slots)), c.int(s.rc.UBatch)), ctxPad))
	}
	if c.err != nil || cells > math.MaxInt {
		return 0, 0, s.fail("KV cells")
	}
	s.e.KVCells, s.e.SWACells = int(cells), int(swaCells)
	return cells, swaCells, nil
}

// kvCache sizes the KV cache by placement, layers × cells × kv_heads ×
// (key_dim + value_dim) × bytes per element, and the recurrent layers'
// state per slot.
func (s *sizing) kvCache() (split, error) {
	kvt := s.p.KVGGMLType()
	if !kvt.Known() || kvt.BlockSize() == 0 {
		return split{}, fmt.Errorf("kv_type %s has no size", kvt)
	}
	cells, swaCells, err := s.cells()
	if err != nil {
		return split{}, err
	}
	c, h := &s.c, s.h
	headElems := c.add(c.int(h.KeyDim), c.int(h.ValueDim))
	var elems split
	var rec uint64
	for l := 0; l < h.Layers; l++ {
		kvh := h.KVHeads[l]
		if kvh == 0 {
			rec = c.add(rec, c.mul(h.SSMStateB, c.int(s.slots)))
			continue
		}
		n := cells
		if h.SWALayers != nil && h.SWALayers[l] {
			n = swaCells
			s.e.SWALayers++
		}
		if layer := c.mul(n, c.int(kvh), headElems); s.onCard(l) {
			elems.card = c.add(elems.card, layer)
		} else {
			elems.host = c.add(elems.host, layer)
		}
	}
	bytes := func(elems uint64) uint64 {
		return c.mul(elems/kvt.BlockSize(), kvt.TypeSize()) + c.mul(elems%kvt.BlockSize(), kvt.TypeSize())/kvt.BlockSize()
	}
	kv := split{card: bytes(elems.card), host: bytes(elems.host)}
	s.e.KVCache = Size(c.add(kv.card, kv.host))
	s.e.Recurrent = Size(rec)
	if c.err != nil {
		return kv, s.fail("KV cache and recurrent state")
	}
	return kv, nil
}

// buffers sizes the compute buffer for one physical batch, as llama.cpp
// reserves it: the feed-forward and residual activations of every token in
// the batch (3·ff + 4·embd floats each, fitted to the logged buffers), the
// logits of one output per slot, and the attention masks over the cells (f16
// with flash attention); without flash attention the KQ matrix over all
// cells for every head as well. The reserve is the worst case: a short
// prompt touches only the mask rows of the cells in use. It also sizes the
// output buffer and the runtime's own overhead.
func (s *sizing) buffers() error {
	c, h, rc := &s.c, s.h, s.rc
	cells, swaCells := c.int(s.e.KVCells), c.int(s.e.SWACells)
	ub := min(c.int(rc.UBatch), cells)
	acts := c.mul(c.add(c.mul(3, c.int(h.FF)), c.mul(4, c.int(h.Embd))), ub, 4)
	logits := c.mul(c.int(h.Vocab), 4, c.int(s.slots))
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
		return s.fail("compute buffer")
	}
	compute := c.add(c.float(rc.ComputeScale*float64(raw)), c.float(ollamaMaskBytes(h, s.rt, int(cells), int(swaCells), int(ub))))
	output := c.mul(c.int(h.Vocab), 4, c.int(s.slots))
	overhead := c.float(max(0, rc.BaseBytes+rc.PerVocabBytes*float64(h.Vocab)))
	if c.err != nil {
		return s.fail("compute buffer and overhead")
	}
	s.e.Compute, s.e.Output, s.e.Overhead = Size(compute), Size(output), Size(overhead)
	return nil
}

// place adds the parts up by placement. On a simulated card the whole
// process tree is held to the card, so everything is the card's; a real
// card holds its layers, their cache and a compute buffer, and the host
// keeps the rest and the runtime itself.
func (s *sizing) place(w, kv split) error {
	c, e := &s.c, &s.e
	rec, compute, output, overhead := uint64(e.Recurrent), uint64(e.Compute), uint64(e.Output), uint64(e.Overhead)
	var card, host uint64
	if s.p.Simulated {
		card = c.add(uint64(e.Weights), uint64(e.KVCache), rec, compute, output, overhead)
	} else {
		card = c.add(w.card, kv.card, rec, compute, c.float(s.rc.CardContextBytes))
		host = c.add(w.host, kv.host, output, overhead)
		if s.cardLayers < s.h.Layers {
			host = c.add(host, compute) // the CPU layers need their own buffer
		}
	}
	peak := c.add(card, host)
	if c.err == nil && peak > math.MaxInt64 {
		c.err = fmt.Errorf("%w: %d bytes in all", ErrOverflow, peak)
	}
	if c.err != nil {
		return s.fail("peak")
	}
	e.Card, e.Host, e.Peak = Size(card), Size(host), Size(peak)
	return nil
}
