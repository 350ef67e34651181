package preflight

import (
	"fmt"
	"strings"
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

func padUp(n, p int) int {
	if p <= 1 {
		return n
	}
	return (n + p - 1) / p * p
}

// Predict sizes a run of the model in f at profile p on runtime rt.
func Predict(f *File, p Profile, rt string, cal *Calibration) (Estimate, error) {
	if err := p.Validate(); err != nil {
		return Estimate{}, err
	}
	rc, err := cal.For(rt)
	if err != nil {
		return Estimate{}, err
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

	slots := p.slots()
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
			wCard += t.Bytes()
		case l >= 0 && onCard(l):
			wCard += t.Bytes()
		case l < 0 && t.Name != "token_embd.weight" && cardLayers >= h.Layers:
			wCard += t.Bytes()
		default:
			wHost += t.Bytes()
		}
	}
	if dup := ollamaTiedCopy(f, h, rt); dup > 0 {
		// The copy is the output head: on the card only when every layer is.
		if p.Simulated || cardLayers >= h.Layers {
			wCard += dup
		} else {
			wHost += dup
		}
		e.Notes = append(e.Notes, fmt.Sprintf("Ollama's own engine holds a second copy of the tied embeddings for the output head (%s)", Size(dup)))
	}
	e.Weights = Size(wCard + wHost)

	// KV cache: layers × cells × kv_heads × (key_dim + value_dim) × bytes per element.
	bpe := p.KVGGMLType().BytesPerElement()
	runCtx := ollamaContext(h, rt, p.Context)
	if runCtx != p.Context {
		e.Notes = append(e.Notes, fmt.Sprintf("Ollama lowers context %d to the model's trained %d, so the run would not hold its pinned context", p.Context, runCtx))
	}
	cells := padUp(runCtx*slots, rc.CtxPad)
	swaCells := 0
	if h.SlidingWin > 0 {
		swaCells = min(cells, padUp(h.SlidingWin*slots+rc.UBatch, rc.CtxPad))
		e.SWACells = swaCells
	}
	e.KVCells = cells
	var kvCard, kvHost, rec float64
	for l := 0; l < h.Layers; l++ {
		kvh := h.KVHeads[l]
		if kvh == 0 {
			rec += float64(h.SSMStateB) * float64(slots)
			continue
		}
		c := cells
		if h.SWALayers != nil && h.SWALayers[l] {
			c = swaCells
			e.SWALayers++
		}
		b := float64(c) * float64(kvh) * float64(h.KeyDim+h.ValueDim) * bpe
		if onCard(l) {
			kvCard += b
		} else {
			kvHost += b
		}
	}
	e.KVCache = Size(kvCard + kvHost)
	e.Recurrent = Size(rec)

	// Compute buffer for one physical batch, as llama.cpp reserves it: the
	// feed-forward and residual activations of every token in the batch
	// (3·ff + 4·embd floats each, fitted to the logged buffers), the logits
	// of one output per slot, and the attention masks over the cells (f16
	// with flash attention); without flash attention the KQ matrix over all
	// cells for every head as well. The reserve is the worst case: a short
	// prompt touches only the mask rows of the cells in use.
	ub := min(rc.UBatch, cells)
	acts := float64(3*h.FF+4*h.Embd) * float64(ub) * 4
	logits := float64(h.Vocab) * 4 * float64(slots)
	maskBytes := 4.0
	if rc.FlashAttention {
		maskBytes = 2
	}
	mask := float64(cells) * float64(ub) * maskBytes
	if h.SlidingWin > 0 {
		mask += float64(swaCells) * float64(ub) * maskBytes
	}
	attn := 0.0
	if !rc.FlashAttention {
		attn = float64(h.Heads) * float64(cells) * float64(ub) * 4
	}
	e.Compute = Size(rc.ComputeScale*(acts+logits+mask+attn) + ollamaMaskBytes(h, rt, cells, swaCells, ub))
	e.Output = Size(float64(h.Vocab) * 4 * float64(slots))
	e.Overhead = Size(rc.BaseBytes + rc.PerVocabBytes*float64(h.Vocab))

	if p.Simulated {
		e.Card = e.Weights + e.KVCache + e.Recurrent + e.Compute + e.Output + e.Overhead
	} else {
		// A real card holds its layers, their cache and a compute buffer;
		// the host keeps the rest and the runtime itself.
		e.Card = Size(wCard) + Size(kvCard) + e.Recurrent + e.Compute
		e.Host = Size(wHost) + Size(kvHost) + e.Output + e.Overhead
		if cardLayers < h.Layers {
			e.Host += e.Compute // the CPU layers need their own buffer
		}
	}
	e.Peak = e.Card + e.Host
	return e, nil
}
