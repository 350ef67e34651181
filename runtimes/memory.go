package runtimes

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// peakMeter measures the peak memory of a runtime's whole process tree for one
// call. With a memory cgroup it reads the cgroup's high-water mark, which counts
// every process the runtime started; without one it sums the processes' VmHWM,
// which can only over-count (peaks of different processes at different times).
type peakMeter struct {
	cgroup string
	root   int
}

func (p peakMeter) source() string {
	if p.cgroup != "" {
		return "cgroup"
	}
	return "vmhwm-sum"
}

// reset starts a new measurement window.
func (p peakMeter) reset() {
	if p.cgroup != "" {
		// v1: writing 0 resets max_usage; v2 (6.12+): any write resets memory.peak for this fd.
		_ = os.WriteFile(filepath.Join(p.cgroup, "memory.max_usage_in_bytes"), []byte("0"), 0)
		return
	}
	for _, pid := range ProcessTree(p.root) {
		_ = os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
	}
}

// read returns the peak in bytes since the last reset.
func (p peakMeter) read() int64 {
	if p.cgroup != "" {
		for _, name := range []string{"memory.max_usage_in_bytes", "memory.peak"} {
			if b, err := os.ReadFile(filepath.Join(p.cgroup, name)); err == nil {
				v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				return v
			}
		}
	}
	var sum int64
	for _, pid := range ProcessTree(p.root) {
		sum += vmHWM(pid)
	}
	return sum
}

func vmHWM(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
