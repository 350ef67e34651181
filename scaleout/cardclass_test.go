package scaleout

import (
	"testing"

	"rig/studies"
)

// NVML's names as the driver reports them (nvidia-smi --query-gpu=name,
// memory.total), and what a design writer would put in its card profile for
// the same card: both sides must land on one class, and different cards or
// sizes must not.
func TestCardClassMeetsNVMLAndTheDesign(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		nvml      string
		nvmlMiB   uint64
		design    string
		designMiB int
		want      string
	}{
		{"NVIDIA H200", 143771, "H200", 143771, "h200-140gib"},
		{"NVIDIA GeForce RTX 4090", 24564, "RTX 4090", 24564, "rtx-4090-24gib"},
		{"Tesla T4", 15360, "nvidia t4", 15360, "t4-15gib"},
		{"NVIDIA A100-SXM4-80GB", 81920, "A100 SXM4", 81920, "a100-sxm4-80gib"},
		{"NVIDIA H100 80GB HBM3", 81559, "NVIDIA H100 HBM3", 81559, "h100-hbm3-80gib"},
		{"NVIDIA RTX A6000", 49140, "RTX A6000", 49140, "rtx-a6000-48gib"},
	}
	for _, c := range cases {
		got := CardClass(c.nvml, c.nvmlMiB*mib)
		if got != c.want {
			t.Errorf("NVML %q, %d MiB: class %q, want %q", c.nvml, c.nvmlMiB, got, c.want)
		}
		d := &studies.Design{CardProfile: studies.CardProfile{GPU: c.design, MemoryMiB: c.designMiB}}
		if arm := ArmCardClass(d, studies.Arm{Name: "a"}); arm != got {
			t.Errorf("design %q, %d MiB: class %q, the worker's %q: the arm's trials would wait on a queue no worker serves", c.design, c.designMiB, arm, got)
		}
	}
	// Different memory is a different class, as is a different card.
	if a, b := CardClass("NVIDIA A100-PCIE-40GB", 40960*mib), CardClass("NVIDIA A100 80GB PCIe", 81920*mib); a == b {
		t.Errorf("a 40 GiB and an 80 GiB A100 share class %q", a)
	}
	if a, b := CardClass("NVIDIA GeForce RTX 4090", 24564*mib), CardClass("NVIDIA GeForce RTX 3090", 24576*mib); a == b {
		t.Errorf("a 4090 and a 3090 share class %q", a)
	}
	// No card, or a name of vendor words only, is cpu; a simulated card is
	// a reservation: its size is not the card's.
	for _, name := range []string{"", "  ", "NVIDIA"} {
		if got := CardClass(name, 8<<30); got != "cpu" {
			t.Errorf("CardClass(%q) = %q, want cpu", name, got)
		}
	}
	sim := &studies.Design{CardProfile: studies.CardProfile{Name: "simulated-8gib", MemoryMiB: 8192, Simulated: true}}
	if got := ArmCardClass(sim, studies.Arm{Name: "a"}); got != "cpu" {
		t.Errorf("a simulated card without a GPU: class %q, want cpu", got)
	}
}
