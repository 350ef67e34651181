package runtimes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"rig/internal/offload"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// llamaServerOffloadArgs are the flags that hold the pin on llama-server.
// The CPU path adds none, so its command line (and every record made with
// it) stays what it was before offload was a pin.
func llamaServerOffloadArgs(p offload.Pin) []string {
	if p.Backend != offload.BackendCUDA {
		return nil
	}
	args := []string{"--n-gpu-layers", p.Layers()}
	if p.FlashAttention != "" {
		args = append(args, "--flash-attn", p.FlashAttention)
	}
	if p.KVOnHost {
		args = append(args, "--no-kv-offload")
	}
	return args
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
	// Ollama's own engine says it in its log's key=value form:
	// msg="model weights" device=CUDA0 size="405.2 MiB".
	ollamaBufferRE = regexp.MustCompile(`msg="(model weights|kv cache|compute graph)" device=(\S+) size="([0-9.]+) (B|KiB|MiB|GiB|TiB)"`)
	deviceRE       = regexp.MustCompile(`ggml_cuda_init: (.*)|Device \d+: (.*), compute capability|no usable GPU found|failed to initialize CUDA: (.*)|failure during GPU discovery|no compatible GPUs were discovered|inference compute" id=\S+ library=\S+`)
)

// ParseLoadReport reads a llama.cpp-based runtime's log. Only the last load
// counts: a log that holds several loads (a restart) is read to its end.
func ParseLoadReport(r io.Reader) (LoadReport, error) {
	rep := LoadReport{Buffers: map[string]int64{}}
	// A load is its offload line and its buffer lines, in either order:
	// llama.cpp prints the offload line first, Ollama's server often logs its
	// runner's buffers before the runner's offload line reaches the log.
	lastKind := ""
	offloadAfterBuffers := false
	newLoad := func() {
		rep = LoadReport{Buffers: map[string]int64{}, DeviceNotes: rep.DeviceNotes}
		offloadAfterBuffers = false
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Lines carry a time stamp and level before the function name
		// (llama-server's "0.00.195.836 I load_tensors: …", Ollama's own
		// prefix), so the patterns are matched anywhere in the line.
		line := sc.Text()
		if m := offloadedRE.FindStringSubmatch(line); m != nil {
			ollamaOrder := strings.Contains(line, `msg="offloaded`)
			if rep.Offloadable || !ollamaOrder && len(rep.Buffers) > 0 {
				newLoad() // this load has its offload line already: the next load
			}
			offloadAfterBuffers = ollamaOrder && len(rep.Buffers) > 0
			rep.LayersOffloaded, _ = strconv.Atoi(m[1])
			rep.LayersTotal, _ = strconv.Atoi(m[2])
			rep.Offloadable = true
			lastKind = "offloaded"
			continue
		}
		if dev, kind, bytes, ok := bufferLine(line); ok {
			// Model buffers after a whole load's other lines start the next
			// load (a restart, or a build that prints no offload line): after
			// KV or compute buffers, or after an offload line that itself
			// closed a load in Ollama's order.
			wholeLoadBefore := lastKind != "" && lastKind != "model" && (lastKind != "offloaded" || offloadAfterBuffers)
			if kind == "model" && wholeLoadBefore {
				newLoad()
			}
			rep.Buffers[dev+" "+kind] += bytes
			lastKind = kind
			continue
		}
		if m := deviceRE.FindString(line); m != "" && !slices.Contains(rep.DeviceNotes, strings.TrimSpace(m)) {
			rep.DeviceNotes = append(rep.DeviceNotes, strings.TrimSpace(m))
		}
	}
	return rep, sc.Err()
}

// bufferLine reads one allocation line, llama.cpp's ("CUDA0 model buffer
// size = 92.10 MiB") or Ollama's engine's (msg="kv cache" device=CPU
// size="21.0 MiB"), as a device, a LoadReport kind and bytes.
func bufferLine(line string) (dev, kind string, bytes int64, ok bool) {
	if m := bufferRE.FindStringSubmatch(line); m != nil {
		mib, err := strconv.ParseFloat(m[3], 64)
		return m[1], m[2], int64(mib * (1 << 20)), err == nil
	}
	m := ollamaBufferRE.FindStringSubmatch(line)
	if m == nil {
		return "", "", 0, false
	}
	n, err := strconv.ParseFloat(m[3], 64)
	if err != nil {
		return "", "", 0, false
	}
	return m[2], ollamaBufferKinds[m[1]], int64(n * byteUnits[m[4]]), true
}

var (
	byteUnits         = map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
	ollamaBufferKinds = map[string]string{"model weights": "model", "kv cache": "KV", "compute graph": "compute"}
)

// holdOffload reads the load report in a started runtime's log and holds it
// to pin. The CPU path reads nothing (nil, nil): a CPU build has no card to
// misplace anything on, and its log level need not print the report.
func holdOffload(kind, model string, pin offload.Pin, logPath string) (*LoadReport, error) {
	if pin.Backend != offload.BackendCUDA {
		return nil, nil
	}
	rep, err := ReadLoadReport(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: reading its load report: %w", kind, err)
	}
	if err := CheckOffload(pin, rep); err != nil {
		return &rep, fmt.Errorf("%s with %s: %w", kind, model, err)
	}
	return &rep, nil
}

// ReadLoadReport parses the load report in a runtime's log file.
func ReadLoadReport(logPath string) (LoadReport, error) {
	f, err := openLog(logPath)
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
func CheckOffload(pin offload.Pin, rep LoadReport) error {
	_, kinds := rep.CardBytes()
	if !pin.OnCard() {
		// The CUDA build reserves a compute buffer on the card even with
		// no layers there; only weights or cache on the card break the pin.
		if rep.Offloadable && rep.LayersOffloaded > 0 || kinds["model"]+kinds["KV"] > 0 {
			return fmt.Errorf("%w: the pin keeps the model off the card (backend %s, gpu_layers %d) but the runtime reported %s",
				ErrOffloadNotHeld, pin.BackendName(), pin.GPULayers, rep)
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
	if want == offload.AllLayers || want > rep.LayersTotal {
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
	if n == offload.AllLayers {
		return "every layer"
	}
	return fmt.Sprintf("%d layers", n)
}

var cardAllocRE = regexp.MustCompile(`unable to allocate CUDA\S* buffer|cudaMalloc failed: out of memory|CUDA error: out of memory|failed to allocate CUDA\S* buffer`)

// cardAllocationFailure is the log line where a CUDA build failed to
// allocate on the card while loading, or "".
func cardAllocationFailure(logPath string) string {
	b, err := ReadLog(logPath)
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
