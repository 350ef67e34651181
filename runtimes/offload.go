package runtimes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
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
