package runtimes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Backends a runtime build computes on.
const (
	BackendCPU  = "cpu"
	BackendCUDA = "cuda"
)

// AllLayers is Offload.GPULayers for "every layer on the card".
const AllLayers = -1

// Offload is an arm's offload pin: where the runtime puts the model. It is
// held like any other pin: recorded on every receipt and checked against the
// runtime's own report once the model has loaded. The zero value is the CPU
// path, which asks nothing of a card.
type Offload struct {
	// Backend is the build's compute backend: "cpu" (or empty) or "cuda".
	Backend string `json:"backend,omitempty"`
	// GPULayers is how many layers go on the card: AllLayers (-1) for every
	// layer and the output head, 0 for none. llama-server's --n-gpu-layers,
	// Ollama's num_gpu.
	GPULayers int `json:"gpu_layers"`
	// FlashAttention is "on" or "off"; empty leaves the runtime's default,
	// which is then recorded as "default" (a pin nobody chose is still a pin).
	FlashAttention string `json:"flash_attention,omitempty"`
	// KVOnHost keeps the KV cache in host memory while the layers sit on the
	// card (llama-server's --no-kv-offload). The default places each layer's
	// cache beside it.
	KVOnHost bool `json:"kv_on_host,omitempty"`
}

// ErrBadOffload marks an offload pin that cannot be used.
var ErrBadOffload = errors.New("bad offload pin")

// OnCard reports whether the pin asks for a card at all.
func (o Offload) OnCard() bool { return o.Backend == BackendCUDA && o.GPULayers != 0 }

// Validate checks the pin's values; field names are the design's JSON names.
func (o Offload) Validate() error {
	switch o.Backend {
	case "", BackendCPU:
		switch {
		case o.GPULayers != 0:
			return fmt.Errorf("%w: gpu_layers %d with backend cpu: a CPU build has no card to put layers on (set backend \"cuda\", or gpu_layers 0)", ErrBadOffload, o.GPULayers)
		case o.FlashAttention != "" || o.KVOnHost:
			return fmt.Errorf("%w: flash_attention and kv_on_host are held on the cuda backend only; the CPU path runs the runtime's defaults (remove them, or set backend \"cuda\")", ErrBadOffload)
		}
	case BackendCUDA:
	default:
		return fmt.Errorf("%w: backend %q is not one of cpu, cuda", ErrBadOffload, o.Backend)
	}
	if o.GPULayers < AllLayers {
		return fmt.Errorf("%w: gpu_layers %d: use -1 for every layer, 0 for none, or a count", ErrBadOffload, o.GPULayers)
	}
	switch o.FlashAttention {
	case "", "on", "off":
	default:
		return fmt.Errorf("%w: flash_attention %q is not one of on, off", ErrBadOffload, o.FlashAttention)
	}
	return nil
}

// llamaServerArgs are the flags that hold the pin on llama-server. The CPU
// path adds none, so its command line (and every record made with it) stays
// what it was before offload was a pin.
func (o Offload) llamaServerArgs() []string {
	if o.Backend != BackendCUDA {
		return nil
	}
	ngl := strconv.Itoa(o.GPULayers)
	if o.GPULayers == AllLayers {
		ngl = "all"
	}
	args := []string{"--n-gpu-layers", ngl}
	if o.FlashAttention != "" {
		args = append(args, "--flash-attn", o.FlashAttention)
	}
	if o.KVOnHost {
		args = append(args, "--no-kv-offload")
	}
	return args
}

// PinFields is the pin as receipt pin entries.
func (o Offload) PinFields() map[string]string {
	backend := o.Backend
	if backend == "" {
		backend = BackendCPU
	}
	layers := strconv.Itoa(o.GPULayers)
	if o.GPULayers == AllLayers {
		layers = "all"
	}
	if backend == BackendCPU {
		layers = "0"
	}
	return map[string]string{
		"offload_backend":  backend,
		"gpu_layers":       layers,
		"flash_attention":  cmpOr(o.FlashAttention, "default"),
		"kv_cache_on_host": strconv.FormatBool(o.KVOnHost || backend == BackendCPU),
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// LoadReport is what a llama.cpp-based runtime said about where it put the
// model: layers offloaded of the layers it could offload, and every buffer
// it allocated by device ("CUDA0", "CPU", "CPU_Mapped", "CUDA_Host") and
// kind ("model", "KV", "compute", "output", "RS").
type LoadReport struct {
	// LayersOffloaded and LayersTotal are from "offloaded N/M layers to
	// GPU"; Offloadable is false when the runtime printed no such line
	// (a build or a machine with no GPU backend).
	LayersOffloaded int              `json:"layers_offloaded"`
	LayersTotal     int              `json:"layers_total"`
	Offloadable     bool             `json:"offloadable"`
	Buffers         map[string]int64 `json:"buffers"` // "CUDA0 model" -> bytes
	// DeviceNotes are what the backend said about the devices it found or
	// failed to find ("no CUDA-capable device is detected").
	DeviceNotes []string `json:"device_notes,omitempty"`
}

var (
	offloadedRE = regexp.MustCompile(`offloaded (\d+)/(\d+) layers to GPU`)
	bufferRE    = regexp.MustCompile(`\w+:\s+(\S+)\s+(model|KV|compute|output|RS)\s+buffer size =\s+([0-9.]+) MiB`)
	deviceRE    = regexp.MustCompile(`ggml_cuda_init: (.*)|Device \d+: (.*), compute capability|no usable GPU found|failed to initialize CUDA: (.*)`)
)

// ParseLoadReport reads a llama.cpp-based runtime's log. Only the last load
// counts: a log that holds several loads (a restart) is read to its end.
func ParseLoadReport(r io.Reader) (LoadReport, error) {
	rep := LoadReport{Buffers: map[string]int64{}}
	lastKind := ""
	newLoad := func() {
		rep.Buffers = map[string]int64{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Lines carry a time stamp and level before the function name
		// (llama-server's "0.00.195.836 I load_tensors: …", Ollama's own
		// prefix), so the patterns are matched anywhere in the line.
		line := sc.Text()
		if m := offloadedRE.FindStringSubmatch(line); m != nil {
			// The offload line comes first in a load: what came before was
			// an earlier load (a restart in the same log).
			newLoad()
			rep.LayersOffloaded, _ = strconv.Atoi(m[1])
			rep.LayersTotal, _ = strconv.Atoi(m[2])
			rep.Offloadable = true
			lastKind = "offloaded"
			continue
		}
		if m := bufferRE.FindStringSubmatch(line); m != nil {
			mib, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				continue
			}
			if m[2] == "model" && lastKind != "model" && lastKind != "offloaded" {
				// Model buffers after KV or compute ones: a new load on a
				// build that prints no offload line.
				newLoad()
				rep.Offloadable, rep.LayersOffloaded, rep.LayersTotal = false, 0, 0
			}
			rep.Buffers[m[1]+" "+m[2]] += int64(mib * (1 << 20))
			lastKind = m[2]
			continue
		}
		if m := deviceRE.FindString(line); m != "" && !slices.Contains(rep.DeviceNotes, strings.TrimSpace(m)) {
			rep.DeviceNotes = append(rep.DeviceNotes, strings.TrimSpace(m))
		}
	}
	return rep, sc.Err()
}

// ReadLoadReport parses the load report in a runtime's log file.
func ReadLoadReport(logPath string) (LoadReport, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return LoadReport{}, err
	}
	defer f.Close()
	return ParseLoadReport(f)
}

// CardBytes is the memory the load put on cards (every CUDA buffer but the
// pinned host staging ones), by kind.
func (r LoadReport) CardBytes() (total int64, byKind map[string]int64) {
	byKind = map[string]int64{}
	for k, v := range r.Buffers {
		dev, kind, _ := strings.Cut(k, " ")
		if strings.HasPrefix(dev, "CUDA") && !strings.HasPrefix(dev, "CUDA_Host") {
			total += v
			byKind[kind] += v
		}
	}
	return total, byKind
}

// String is the report in one line, devices sorted.
func (r LoadReport) String() string {
	keys := make([]string, 0, len(r.Buffers))
	for k := range r.Buffers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f MiB", k, float64(r.Buffers[k])/(1<<20)))
	}
	layers := "no GPU offload reported"
	if r.Offloadable {
		layers = fmt.Sprintf("%d/%d layers on the card", r.LayersOffloaded, r.LayersTotal)
	}
	return layers + "; " + strings.Join(parts, ", ")
}

// ErrOffloadNotHeld means the runtime did not place the model as its offload
// pin says: a run pinned to full offload that the runtime placed partly on
// the host (or not on a card at all) does not fit at this card. It is never
// run as a silent partial offload.
var ErrOffloadNotHeld = errors.New("doesn't fit at this card")

// CheckOffload holds a loaded runtime to its pin. The CPU path is held to
// having put nothing on a card.
func CheckOffload(pin Offload, rep LoadReport) error {
	_, kinds := rep.CardBytes()
	if !pin.OnCard() {
		// The CUDA build reserves a compute buffer on the card even with
		// no layers there; only weights or cache on the card break the pin.
		if rep.Offloadable && rep.LayersOffloaded > 0 || kinds["model"]+kinds["KV"] > 0 {
			return fmt.Errorf("%w: the pin keeps the model off the card (backend %s, gpu_layers %d) but the runtime reported %s",
				ErrOffloadNotHeld, cmpOr(pin.Backend, BackendCPU), pin.GPULayers, rep)
		}
		return nil
	}
	if !rep.Offloadable {
		why := "the runtime reported no GPU offload at all"
		if len(rep.DeviceNotes) > 0 {
			why += " (" + strings.Join(rep.DeviceNotes, "; ") + ")"
		}
		return fmt.Errorf("%w: pinned to %s on the card, but %s: is this the CUDA build, and does the machine have its card?", ErrOffloadNotHeld, layersWord(pin.GPULayers), why)
	}
	want := pin.GPULayers
	if want == AllLayers || want > rep.LayersTotal {
		want = rep.LayersTotal
	}
	if rep.LayersOffloaded < want {
		return fmt.Errorf("%w: pinned to %s on the card, the runtime placed %d of %d there and the rest on the host (%s); rig never runs a silent partial offload",
			ErrOffloadNotHeld, layersWord(pin.GPULayers), rep.LayersOffloaded, rep.LayersTotal, rep)
	}
	if kinds["model"] == 0 {
		return fmt.Errorf("%w: the runtime says %d/%d layers are offloaded but allocated no card buffer for the weights (%s)",
			ErrOffloadNotHeld, rep.LayersOffloaded, rep.LayersTotal, rep)
	}
	if !pin.KVOnHost && kinds["KV"] == 0 && rep.Buffers["CPU KV"] > 0 {
		return fmt.Errorf("%w: the pin places the KV cache with its layers on the card, but the runtime put it on the host (%s)", ErrOffloadNotHeld, rep)
	}
	if pin.KVOnHost && kinds["KV"] > 0 {
		return fmt.Errorf("%w: the pin holds the KV cache on the host, but the runtime put %.1f MiB of it on the card", ErrOffloadNotHeld, float64(kinds["KV"])/(1<<20))
	}
	return nil
}

func layersWord(n int) string {
	if n == AllLayers {
		return "every layer"
	}
	return fmt.Sprintf("%d layers", n)
}

var cardAllocRE = regexp.MustCompile(`unable to allocate CUDA\S* buffer|cudaMalloc failed: out of memory|CUDA error: out of memory|failed to allocate CUDA\S* buffer`)

// cardAllocationFailure is the log line where a CUDA build failed to
// allocate on the card while loading, or "".
func cardAllocationFailure(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if cardAllocRE.MatchString(line) {
			if i := strings.Index(line, " "); i > 0 && i < 20 {
				line = strings.TrimSpace(line[i:]) // past the time stamp
			}
			return strings.TrimSpace(line)
		}
	}
	return ""
}
