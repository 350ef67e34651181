package runtimes

import (
	"errors"
	"os"
	"path/filepath"
	"rig/internal/offload"
	"slices"
	"strings"
	"testing"
)

func loadFixture(t *testing.T, name string) LoadReport {
	t.Helper()
	rep, err := ReadLoadReport(filepath.Join("testdata", "loadreport", name))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestLoadReportOfTheCPUBuild(t *testing.T) {
	rep := loadFixture(t, "llama-server-cpu-smollm2.log")
	if rep.Offloadable {
		t.Errorf("the CPU build printed no offload line, parsed %+v", rep)
	}
	if got := rep.Buffers["CPU_Mapped model"]; got < 90<<20 || got > 95<<20 {
		t.Errorf("CPU_Mapped model buffer = %d bytes; the log says 92.10 MiB", got)
	}
	for _, k := range []string{"CPU KV", "CPU compute", "CPU output"} {
		if rep.Buffers[k] == 0 {
			t.Errorf("no %q buffer parsed from %v", k, rep.Buffers)
		}
	}
	if card, _ := rep.CardBytes(); card != 0 {
		t.Errorf("a CPU load put %d bytes on a card", card)
	}
	if err := CheckOffload(offload.Pin{}, rep); err != nil {
		t.Errorf("the CPU path is held by a CPU load: %v", err)
	}
	if err := CheckOffload(offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}, rep); !errors.Is(err, ErrOffloadNotHeld) {
		t.Errorf("a full-offload pin on a CPU load: got %v, want ErrOffloadNotHeld", err)
	}
}

func TestFullOffloadIsHeld(t *testing.T) {
	rep := loadFixture(t, "llama-server-cuda-full.log")
	if !rep.Offloadable || rep.LayersOffloaded != 31 || rep.LayersTotal != 31 {
		t.Fatalf("parsed %+v", rep)
	}
	card, kinds := rep.CardBytes()
	if kinds["model"] == 0 || kinds["KV"] == 0 || kinds["compute"] == 0 {
		t.Errorf("card buffers by kind %v", kinds)
	}
	if _, ok := kinds["output"]; ok {
		t.Errorf("the CUDA_Host output buffer is host memory, counted on the card: %v", kinds)
	}
	if card < 200<<20 {
		t.Errorf("card bytes %d; the log puts about 203 MiB on CUDA0", card)
	}
	if !slices.ContainsFunc(rep.DeviceNotes, func(s string) bool { return strings.Contains(s, "NVIDIA H200") }) {
		t.Errorf("device notes %v do not name the card", rep.DeviceNotes)
	}
	for _, pin := range []offload.Pin{{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}, {Backend: offload.BackendCUDA, GPULayers: 20}, {Backend: offload.BackendCUDA, GPULayers: 99}} {
		if err := CheckOffload(pin, rep); err != nil {
			t.Errorf("pin %+v: %v", pin, err)
		}
	}
	if err := CheckOffload(offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers, KVOnHost: true}, rep); !errors.Is(err, ErrOffloadNotHeld) {
		t.Errorf("a KV-on-host pin with the cache on the card: got %v", err)
	}
	if err := CheckOffload(offload.Pin{}, rep); !errors.Is(err, ErrOffloadNotHeld) {
		t.Errorf("a CPU pin with the model on a card: got %v", err)
	}
}

func TestPartialOffloadIsDoesntFitAtThisCard(t *testing.T) {
	rep := loadFixture(t, "llama-server-cuda-partial.log")
	err := CheckOffload(offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}, rep)
	if !errors.Is(err, ErrOffloadNotHeld) {
		t.Fatalf("got %v, want ErrOffloadNotHeld", err)
	}
	for _, want := range []string{"doesn't fit at this card", "20 of 31", "never runs a silent partial offload"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// A pin that asked for 20 layers got them.
	if err := CheckOffload(offload.Pin{Backend: offload.BackendCUDA, GPULayers: 20}, rep); err != nil {
		t.Errorf("pin of 20 layers, 20 placed: %v", err)
	}
}

func TestLoadReportReadsTheLastLoad(t *testing.T) {
	full, err := os.ReadFile(filepath.Join("testdata", "loadreport", "llama-server-cuda-full.log"))
	if err != nil {
		t.Fatal(err)
	}
	partial, err := os.ReadFile(filepath.Join("testdata", "loadreport", "llama-server-cuda-partial.log"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ParseLoadReport(strings.NewReader(string(full) + string(partial)))
	if err != nil {
		t.Fatal(err)
	}
	if rep.LayersOffloaded != 20 || rep.Buffers["CUDA0 model"] > 62<<20 {
		t.Errorf("a restart's second load should be the one read: %s", rep)
	}
}

func TestLlamaServerOffloadArgs(t *testing.T) {
	args := llamaServerOffloadArgs(offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers, FlashAttention: "off", KVOnHost: true})
	if got := strings.Join(args, " "); got != "--n-gpu-layers all --flash-attn off --no-kv-offload" {
		t.Errorf("llama-server args %q", got)
	}
	if args := llamaServerOffloadArgs(offload.Pin{}); len(args) != 0 {
		t.Errorf("the CPU path adds flags %v; its command line must stay as it was", args)
	}
}

func FuzzParseLoadReport(f *testing.F) {
	for _, name := range []string{"llama-server-cpu-smollm2.log", "llama-server-cuda-full.log", "llama-server-cuda-partial.log"} {
		b, err := os.ReadFile(filepath.Join("testdata", "loadreport", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, log string) {
		rep, err := ParseLoadReport(strings.NewReader(log))
		if err != nil {
			return
		}
		if rep.LayersOffloaded < 0 || rep.LayersTotal < 0 {
			t.Fatalf("negative layers %+v", rep)
		}
		_ = CheckOffload(offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}, rep)
		_ = rep.String()
	})
}

// The CUDA build on a machine with no card, pinned to every layer: it loads
// on the host without a word of complaint past its first line. rig refuses
// it with that line.
func TestCUDABuildWithNoDeviceIsRefused(t *testing.T) {
	rep := loadFixture(t, "llama-server-cuda-nodevice-smollm2.log")
	if rep.Offloadable {
		t.Fatalf("no device, yet an offload line was parsed: %+v", rep)
	}
	if rep.Buffers["CPU_Mapped model"] == 0 {
		t.Errorf("the host load's buffers were not read: %v", rep.Buffers)
	}
	err := CheckOffload(offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}, rep)
	if !errors.Is(err, ErrOffloadNotHeld) || !strings.Contains(err.Error(), "failed to initialize CUDA") {
		t.Errorf("got %v; want doesn't fit at this card, quoting the backend's failure", err)
	}
}

func TestDeviceListing(t *testing.T) {
	noCard := "0.00.002.694 E ggml_cuda_init: failed to initialize CUDA: CUDA driver version is insufficient for CUDA runtime version\nAvailable devices:\n  (none)\n"
	if got := parseDeviceList(noCard); len(got) != 1 || !strings.HasPrefix(got[0], "no card: ggml_cuda_init: failed") {
		t.Errorf("no card: %q", got)
	}
	card := "ggml_cuda_init: found 1 CUDA devices (Total VRAM: 143167 MiB):\nAvailable devices:\n  CUDA0: NVIDIA H200 (143167 MiB, 142519 MiB free)\n"
	if got := parseDeviceList(card); len(got) != 1 || got[0] != "CUDA0: NVIDIA H200 (143167 MiB, 142519 MiB free)" {
		t.Errorf("a card: %q", got)
	}
	if got := parseDeviceList("Available devices:\n"); len(got) != 0 {
		t.Errorf("the CPU build: %q", got)
	}
}

// Ollama's engine logs the runner's buffers before or after its offload
// line; either way they are one load, and a second load replaces the first.
func TestOllamaLoadReports(t *testing.T) {
	all := offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}
	cpu := loadFixture(t, "ollama-cpu-gemma3.log")
	if !cpu.Offloadable || cpu.LayersOffloaded != 0 || cpu.LayersTotal != 19 {
		t.Errorf("CPU capture: %+v", cpu)
	}
	if got := cpu.Buffers["CPU model"]; got < 405<<20 || got > 406<<20 {
		t.Errorf("CPU model weights %d bytes; the log says 405.2 MiB (%v)", got, cpu.Buffers)
	}
	if cpu.Buffers["CPU KV"] == 0 || cpu.Buffers["CPU compute"] == 0 {
		t.Errorf("kv cache and compute graph not read: %v", cpu.Buffers)
	}
	if err := CheckOffload(offload.Pin{}, cpu); err != nil {
		t.Errorf("the CPU path is held by a CPU load: %v", err)
	}

	nodev := loadFixture(t, "ollama-cuda-nodevice-gemma3.log")
	err := CheckOffload(all, nodev)
	if !errors.Is(err, ErrOffloadNotHeld) || !strings.Contains(err.Error(), "placed 0 of 19") {
		t.Errorf("the CUDA build with no card: got %v, want doesn't fit at this card, 0 of 19 placed", err)
	}
	if !slices.ContainsFunc(nodev.DeviceNotes, func(n string) bool { return strings.Contains(n, "library=cpu") }) {
		t.Errorf("the discovery's own words are not kept: %q", nodev.DeviceNotes)
	}

	full := loadFixture(t, "ollama-cuda-full.log")
	if err := CheckOffload(all, full); err != nil {
		t.Errorf("every layer on CUDA0: %v", err)
	}
	if card, kinds := full.CardBytes(); card == 0 || kinds["KV"] == 0 {
		t.Errorf("card bytes %d by kind %v", card, kinds)
	}
	partial := loadFixture(t, "ollama-cuda-partial.log")
	if err := CheckOffload(all, partial); !errors.Is(err, ErrOffloadNotHeld) || !strings.Contains(err.Error(), "12 of 19") {
		t.Errorf("12 of 19 layers for a full pin: got %v", err)
	}
	if err := CheckOffload(offload.Pin{Backend: offload.BackendCUDA, GPULayers: 12}, partial); err != nil {
		t.Errorf("12 layers pinned, 12 placed: %v", err)
	}

	// Two loads in one log, each in Ollama's order: only the last counts.
	two, err := ParseLoadReport(strings.NewReader(readFixture(t, "ollama-cuda-partial.log") + readFixture(t, "ollama-cuda-full.log")))
	if err != nil {
		t.Fatal(err)
	}
	if two.LayersOffloaded != 19 || two.Buffers["CUDA0 model"] != full.Buffers["CUDA0 model"] || two.Buffers["CPU KV"] != 0 {
		t.Errorf("two loads read as %+v, want the last one alone (%+v)", two, full)
	}
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "loadreport", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A simulated smaller card on the real one is told to Ollama as the rest of
// the card left free; the CPU path and the whole card tell it nothing.
func TestOllamaIsToldASimulatedCard(t *testing.T) {
	onCard := offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}
	for _, cfg := range []Config{{CardBudget: 512 << 20}, {Offload: onCard}} {
		if got, err := ollamaGPUOverhead(cfg); got != 0 || err != nil {
			t.Errorf("%+v: overhead %d, %v; want none", cfg, got, err)
		}
	}
	got, err := ollamaGPUOverhead(Config{Offload: onCard, CardBudget: 512 << 20})
	total, terr := CardTotalBytes()
	if terr != nil {
		// These machines: no card to carve the simulated one from.
		if err == nil || !strings.Contains(err.Error(), "simulated card of 512 MiB") {
			t.Errorf("no card: got %d, %v; want a refusal naming the simulated card", got, err)
		}
		return
	}
	if err != nil || got != total-512<<20 {
		t.Errorf("card of %d bytes: overhead %d, %v; want %d", total, got, err, total-512<<20)
	}
}
