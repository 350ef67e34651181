package preflight

import (
	"fmt"

	"rig/internal/gguf"
)

// RuntimeOpenAIServer is a generic OpenAI-compatible server (vLLM, SGLang,
// llama-cpp-python, llama-server's own /v1) that a design describes and rig
// starts but does not build: its own memory (interpreter, libraries,
// compute buffers, what it reserves up front) is not known to rig, so only
// what the model file says is sized.
const RuntimeOpenAIServer = "openai-server"

// ServerRelError is the margin a generic server's estimate must leave on the
// card before it is called "fits": the estimate is a floor (weights and KV
// cache only), not a fitted prediction, so the margin stands in for what it
// leaves out. A card short of the floor itself does not fit whatever the
// server's own needs.
const ServerRelError = 0.25

// serverSizing is the only part of a runtime's calibration a generic
// server's sizing reads: its KV cells unpadded, a sliding window's cells
// counted as llama.cpp holds them (the window and one physical batch per
// slot), and the margin.
var serverSizing = RuntimeCalibration{ComputeScale: 1, UBatch: 512, CtxPad: 1, RelError: ServerRelError}

// ServerEstimateNote is what a generic server's verdict says of its
// estimate, so that no one reads it as rig's calibrated prediction.
const ServerEstimateNote = "openai-server: an estimate from the GGUF for a server rig does not build: the weights and a KV cache of the pinned context × slots (f16), all on the card; the server's own memory (its runtime, compute buffers, and what it reserves up front: vLLM and SGLang take most of a card) is not modelled, so a fit needs a 25% margin, and a card short of the weights and KV cache alone does not fit"

// sizeServer sizes a generic server's arm from the GGUF it reads: every
// tensor and the KV cache of context × slots (and a recurrent layer's state
// per slot), all held to the card, the way a GPU server places them and the
// way a simulated card holds the whole process tree. Compute, output and
// overhead are left at zero: they are the server's own.
func sizeServer(f *gguf.File, p Profile, h HParams, e Estimate) (Estimate, error) {
	whole := p
	whole.Simulated = true // everything on the card (size's placement step)
	s := &sizing{p: whole, rt: RuntimeOpenAIServer, rc: serverSizing, h: h, e: e, slots: p.Slots(), cardLayers: h.Layers}
	s.e.CardLayers = h.Layers
	s.e.Calibrated = "never (an estimate from the GGUF)"
	w, err := s.weights(f)
	if err != nil {
		return s.e, err
	}
	kv, err := s.kvCache()
	if err != nil {
		return s.e, err
	}
	if err := s.place(w, kv); err != nil {
		return s.e, err
	}
	s.e.Notes = append(s.e.Notes, ServerEstimateNote)
	if p.Slots() > 1 {
		s.e.Notes = append(s.e.Notes, fmt.Sprintf("openai-server: the KV cache holds %d slots × context %d; a server that shares one pool among its requests (vLLM's paged cache) may hold less", p.Slots(), p.Context))
	}
	return s.e, nil
}
