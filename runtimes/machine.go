package runtimes

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"golang.org/x/sys/unix"
)

// Machine is the machine line recorded with every run: CPU, memory, kernel, OS
// and GPU. Main runs of a study use one machine line.
type Machine struct {
	CPU       string   `json:"cpu"`
	Cores     int      `json:"cores"`
	MemoryMiB int64    `json:"memory_mib"`
	Kernel    string   `json:"kernel"`
	OS        string   `json:"os"`
	GPUs      []string `json:"gpus"`     // "NVIDIA H200 (143771 MiB), driver 580.95.05, CUDA 13.0"
	GPUNote   string   `json:"gpu_note"` // why there is none, said plainly
	// CUDADriver is the newest CUDA the driver runs ("13.0"), "" without
	// NVML; the line names it only for a card's run (Backend "cuda").
	CUDADriver string `json:"cuda_driver,omitempty"`
	// Backend is the compute backend of the runtime build the line was
	// read for ("cpu", "cuda"); empty for a line read outside a runtime.
	Backend string `json:"backend,omitempty"`
}

// String is the one-line form printed on reports and receipts.
func (m Machine) String() string {
	gpu := m.GPUNote
	if len(m.GPUs) > 0 {
		gpu = strings.Join(m.GPUs, "; ")
	}
	line := fmt.Sprintf("%s ×%d, %d MiB RAM, %s, kernel %s, GPU: %s", m.CPU, m.Cores, m.MemoryMiB, m.OS, m.Kernel, gpu)
	if m.Backend != "" {
		if m.CUDADriver != "" {
			line += ", driver's CUDA " + m.CUDADriver
		}
		line += lineBackend + m.Backend
	}
	return line
}

// lineBackend introduces the backend on a card's machine line, last.
const lineBackend = ", runtime backend "

// LineBackend is the runtime backend a machine line names ("cuda"), or ""
// for a line that names none (the CPU path's, whose line never did).
func LineBackend(line string) string {
	_, backend, ok := strings.Cut(line, lineBackend)
	if !ok {
		return ""
	}
	return backend
}

// ReadMachine reads the machine line from /proc, uname and NVML.
func ReadMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), CPU: "unknown CPU", OS: "unknown OS"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemoryMiB = int64(si.Totalram) * int64(si.Unit) >> 20
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	m.GPUs, m.GPUNote, m.CUDADriver = readGPUs()
	return m
}

// CPUFlags are the processor's feature flags as the kernel lists them
// (/proc/cpuinfo "flags": "avx2", "fma", "avx512f", …), for checking that a
// runtime's CPU backend uses what the processor has. nil when unreadable.
func CPUFlags() []string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "flags" {
			return strings.Fields(v)
		}
	}
	return nil
}

// readGPUs lists the cards, says why there are none, and gives the newest
// CUDA the driver runs (NVML's 13000 is "13.0"; "" without NVML).
func readGPUs() (gpus []string, note, cuda string) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, "none (NVML unavailable: " + nvml.ErrorString(ret) + "); simulated cards only", ""
	}
	defer nvml.Shutdown()
	if v, ret := nvml.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		cuda = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	driver, _ := nvml.SystemGetDriverVersion()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS || n == 0 {
		return nil, "none (NVML found no device); simulated cards only", cuda
	}
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		name, _ := d.GetName()
		mem, _ := d.GetMemoryInfo()
		gpus = append(gpus, fmt.Sprintf("%s (%d MiB), driver %s", name, mem.Total>>20, driver))
	}
	return gpus, "", cuda
}

// CardTotalBytes is the memory of card 0 as NVML reports it: what a
// simulated smaller card on it is carved from.
func CardTotalBytes() (uint64, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return 0, fmt.Errorf("NVML unavailable: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	d, ret := nvml.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("NVML lists no card 0: %s", nvml.ErrorString(ret))
	}
	mem, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("NVML: card 0's memory: %s", nvml.ErrorString(ret))
	}
	return mem.Total, nil
}
