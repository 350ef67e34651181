package deploy

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The shipped units and pods hold rig and what it starts to a memory
// limit, so that a runaway (issue 43: a sandbox posting a gigabyte to the
// daemon) ends in a refused call or a killed process in that unit, never a
// machine out of memory; and a process killed there does not stop the unit.
func TestSystemdUnitsHoldMemory(t *testing.T) {
	for _, name := range []string{"rig-daemon.service", "rig-worker@.service"} {
		s := readUnit(t, filepath.Join("systemd", name))["Service"]
		high, maxv := one(t, name, s, "MemoryHigh"), one(t, name, s, "MemoryMax")
		h, hok := percent(high)
		m, mok := percent(maxv)
		if !hok || !mok || h >= m || m > 95 {
			t.Errorf("%s: MemoryHigh=%s MemoryMax=%s; want percentages of the machine, MemoryHigh below MemoryMax, and room left for the rest of it", name, high, maxv)
		}
		if p := one(t, name, s, "OOMPolicy"); p != "continue" {
			t.Errorf("%s: OOMPolicy=%s; a runtime killed for memory would stop the unit and every trial in it", name, p)
		}
		if len(s["CPUQuota"]) > 0 {
			t.Errorf("%s: CPUQuota=%s: throttling would slow what is measured", name, s["CPUQuota"][0])
		}
	}
	// The fault suite runs one small model: fixed sizes, the high mark
	// under the maximum.
	name := "rig-governor-faults.service"
	s := readUnit(t, filepath.Join("systemd", name))["Service"]
	high, maxv := one(t, name, s, "MemoryHigh"), one(t, name, s, "MemoryMax")
	h, hok := gigabytes(high)
	m, mok := gigabytes(maxv)
	if !hok || !mok || h >= m {
		t.Errorf("%s: MemoryHigh=%s MemoryMax=%s; want sizes in G, MemoryHigh below MemoryMax", name, high, maxv)
	}
}

func gigabytes(v string) (float64, bool) {
	n, err := strconv.ParseFloat(strings.TrimSuffix(v, "G"), 64)
	return n, err == nil && strings.HasSuffix(v, "G") && n > 0
}

func one(t *testing.T, unit string, s map[string][]string, key string) string {
	t.Helper()
	if len(s[key]) != 1 {
		t.Fatalf("%s: %d %s= lines, want 1", unit, len(s[key]), key)
	}
	return s[key][0]
}

func percent(v string) (float64, bool) {
	n, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	return n, err == nil && strings.HasSuffix(v, "%") && n > 0
}

func TestKubernetesContainersHoldMemory(t *testing.T) {
	spec := deployment(t).Spec.Template.Spec
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		lim, req := c.Resources.Limits.Memory(), c.Resources.Requests.Memory()
		if lim.IsZero() || req.IsZero() || req.Cmp(*lim) > 0 {
			t.Errorf("%s: container %s: memory request %s, limit %s; want both, the request at most the limit", manifest, c.Name, req, lim)
		}
		if c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("%s: container %s requests no CPU: the scheduler would place it on cores other pods use", manifest, c.Name)
		}
		if !c.Resources.Limits.Cpu().IsZero() {
			t.Errorf("%s: container %s has a CPU limit: throttling would slow what is measured", manifest, c.Name)
		}
	}
}
