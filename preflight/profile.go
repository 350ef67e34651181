package preflight

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"rig/internal/gguf"
	"rig/internal/jsonerr"
	"rig/internal/sizecap"
)

// OffloadAll puts every layer on the card (llama.cpp's -ngl 999).
const OffloadAll = -1

// Profile is what a run is held to: the card's memory, the context, the
// quant, the KV-cache type, how many layers sit on the card, the host's
// memory and the parallel slots. A simulated profile is enforced with a
// memory cgroup (cgroup.Reservation, in internal/cgroup); a real one names
// an NVML card.
type Profile struct {
	Name          string `json:"name"`
	CardMemory    Size   `json:"card_memory"`
	HostMemory    Size   `json:"host_memory,omitempty"`
	Context       int    `json:"context"`
	Quant         string `json:"quant,omitempty"`   // the model file's quant the arm pins, e.g. "Q4_K_M"; empty = any
	KVType        string `json:"kv_type,omitempty"` // f16 (default), q8_0 or q4_0
	OffloadLayers int    `json:"offload_layers"`    // layers on the card; OffloadAll (-1) = all
	Parallel      int    `json:"parallel,omitempty"`
	Simulated     bool   `json:"simulated"`
	CardIndex     int    `json:"card_index,omitempty"` // NVML index when not simulated
	// Backend is the runtime build's compute backend: "cpu" (empty) or
	// "cuda". Each backend has its own calibration; one with none is
	// refused as uncalibrated, never called "fits".
	Backend string `json:"backend,omitempty"`
}

// ErrBadProfile marks a profile that cannot be used.
var ErrBadProfile = errors.New("bad card profile")

// KVTypes are the KV-cache element types rig accepts.
var kvTypes = map[string]gguf.GGMLType{"f16": gguf.TypeF16, "f32": gguf.TypeF32, "bf16": gguf.TypeBF16, "q8_0": gguf.TypeQ8_0, "q4_0": gguf.TypeQ4_0, "q4_1": gguf.TypeQ4_1, "q5_0": gguf.TypeQ5_0, "q5_1": gguf.TypeQ5_1, "iq4_nl": gguf.TypeIQ4_NL}

// KVGGMLType is the cache element type.
func (p Profile) KVGGMLType() gguf.GGMLType {
	t, ok := kvTypes[strings.ToLower(p.CacheType())]
	if !ok {
		return gguf.TypeF16
	}
	return t
}

// CacheType is the KV cache's type as runtimes spell it (f16 when unset).
func (p Profile) CacheType() string {
	if p.KVType == "" {
		return "f16"
	}
	return strings.ToLower(p.KVType)
}

// Slots is how many sequences run at once (1 when unset).
func (p Profile) Slots() int {
	if p.Parallel <= 0 {
		return 1
	}
	return p.Parallel
}

// Validate checks every field and names the first bad one and its fix.
func (p Profile) Validate() error {
	name := p.Name
	if name == "" {
		name = "profile"
	}
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s.%s: %s", ErrBadProfile, name, field, fmt.Sprintf(format, a...))
	}
	if p.CardMemory == 0 {
		return bad("card_memory", "missing or zero (give the card size, e.g. 8GiB)")
	}
	if p.CardMemory > MaxSize {
		return bad("card_memory", "%s is more than 1TiB (check the unit)", p.CardMemory)
	}
	if p.HostMemory > MaxSize {
		return bad("host_memory", "%s is more than 1TiB (check the unit)", p.HostMemory)
	}
	if p.Context <= 0 {
		return bad("context", "%d is not positive (give the pinned context, e.g. 8192)", p.Context)
	}
	if p.Context > 1<<24 {
		return bad("context", "%d is absurd (more than 16M tokens)", p.Context)
	}
	if _, ok := kvTypes[p.CacheType()]; !ok {
		return bad("kv_type", "%q is not one of f16, q8_0, q4_0 (or f32, bf16, q4_1, q5_0, q5_1, iq4_nl)", p.KVType)
	}
	if p.OffloadLayers < OffloadAll {
		return bad("offload_layers", "%d is negative (use -1 for all layers, 0 for none)", p.OffloadLayers)
	}
	switch p.Backend {
	case "", "cpu", "cuda":
	default:
		return bad("backend", "%q is not one of cpu, cuda", p.Backend)
	}
	if p.Parallel < 0 || p.Parallel > 256 {
		return bad("parallel", "%d slots is outside 1..256", p.Parallel)
	}
	return nil
}

// ParseProfile reads the command-line form
// "card=8GiB,ctx=8192,kv=q8_0,offload=all,host=32GiB,np=1,quant=Q4_K_M,name=sim-8g".
// A simulated card is assumed unless "nvml=N" names a real one, which also
// sets the CUDA backend ("backend=cpu|cuda" says it outright).
func ParseProfile(spec string) (Profile, error) {
	p := Profile{Simulated: true, OffloadLayers: OffloadAll, Parallel: 1}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return p, fmt.Errorf("%w: --profile %q: %q is not key=value (keys: card, ctx, kv, offload, host, np, quant, name, nvml, backend)", ErrBadProfile, spec, part)
		}
		var err error
		switch strings.ToLower(k) {
		case "card", "card_memory", "vram":
			p.CardMemory, err = ParseSize(v)
		case "host", "host_memory", "ram":
			p.HostMemory, err = ParseSize(v)
		case "ctx", "context":
			p.Context, err = strconv.Atoi(v)
		case "kv", "kv_type", "cache":
			p.KVType = strings.ToLower(v)
		case "offload", "ngl":
			if v == "all" {
				p.OffloadLayers = OffloadAll
			} else {
				p.OffloadLayers, err = strconv.Atoi(v)
			}
		case "np", "parallel", "slots":
			p.Parallel, err = strconv.Atoi(v)
		case "quant":
			p.Quant = v
		case "name":
			p.Name = v
		case "nvml":
			p.Simulated = false
			p.CardIndex, err = strconv.Atoi(v)
			if p.Backend == "" {
				p.Backend = "cuda"
			}
		case "backend":
			p.Backend = strings.ToLower(v)
		default:
			return p, fmt.Errorf("%w: --profile %q: unknown key %q (keys: card, ctx, kv, offload, host, np, quant, name, nvml, backend)", ErrBadProfile, spec, k)
		}
		if err != nil {
			return p, fmt.Errorf("%w: --profile %q: %s: %w", ErrBadProfile, spec, k, err)
		}
	}
	if p.Name == "" {
		p.Name = "sim-" + p.CardMemory.String()
	}
	return p, p.Validate()
}

// CardsFile is the declared card list, e.g. cards.json:
//
//	{"cards": [{"name": "sim-8g", "card_memory": "8GiB", "context": 8192, "simulated": true}]}
type CardsFile struct {
	Cards []Profile `json:"cards"`
}

// cardsCap bounds a declared card list: a handful of cards, a few hundred
// bytes each.
var cardsCap = sizecap.Cap{What: "card list", Limit: 1 << 20, Fix: "a card list holds a few cards: name the file meant"}

// LoadCards reads and validates a declared card list.
func LoadCards(path string) ([]Profile, error) {
	b, err := cardsCap.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("preflight: card list: %w", err)
	}
	return ParseCards(b, path)
}

// ParseCards decodes a card list; name is used in errors.
func ParseCards(b []byte, name string) ([]Profile, error) {
	var cf CardsFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cf); err != nil {
		return nil, fmt.Errorf("%s: %s (expected {\"cards\": [{\"name\": …, \"card_memory\": \"8GiB\", \"context\": 8192}]})", name, jsonerr.Message(err))
	}
	seen := map[string]bool{}
	for i, p := range cf.Cards {
		if p.Name == "" {
			return nil, fmt.Errorf("%s: cards[%d].name: missing (every card needs a name to be referred to)", name, i)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("%s: cards[%d].name: %q appears twice (names must be unique)", name, i, p.Name)
		}
		seen[p.Name] = true
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("%s: cards[%d]: %w", name, i, err)
		}
	}
	return cf.Cards, nil
}
