package runtimes

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"rig/internal/cgroup"
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

// peakWindow is one call's measurement, from start to read.
type peakWindow struct {
	m peakMeter
	w *cgroup.Window // nil without a cgroup, or when its peak cannot be read
}

// start opens a measurement window: a cgroup peak window (see cgroup.Window
// for what each version can reset), or cleared VmHWM marks.
func (p peakMeter) start() peakWindow {
	if p.cgroup != "" {
		if w, err := cgroup.OpenWindow(p.cgroup); err == nil {
			return peakWindow{m: p, w: w}
		}
	}
	for _, pid := range ProcessTree(p.root) {
		_ = os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
	}
	return peakWindow{m: p}
}

// read returns the peak in bytes since start and ends the window.
func (pw peakWindow) read() int64 {
	if pw.w != nil {
		v, err := pw.w.Peak()
		_ = pw.w.Close()
		if err == nil {
			return int64(v)
		}
	}
	var sum int64
	for _, pid := range ProcessTree(pw.m.root) {
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
