package runtimes

import "testing"

// TestLineBackend reads back the backend a machine line was written with:
// a card's run names it, the CPU path's line (unchanged since before the
// backend was written) names none.
func TestLineBackend(t *testing.T) {
	for _, m := range []Machine{
		{CPU: "AMD EPYC", Cores: 2, MemoryMiB: 24000, OS: "Debian", Kernel: "6.1", GPUNote: "no NVIDIA driver"},
		{CPU: "AMD EPYC", Cores: 16, GPUs: []string{"NVIDIA H200 (143771 MiB), driver 580.95.05, CUDA 13.0"}, CUDADriver: "13.0", Backend: "cuda"},
		{CPU: "AMD EPYC", Cores: 16, GPUs: []string{"NVIDIA H200"}, Backend: "cpu"},
	} {
		if got := LineBackend(m.String()); got != m.Backend {
			t.Errorf("LineBackend(%q) = %q, written with %q", m.String(), got, m.Backend)
		}
	}
}
