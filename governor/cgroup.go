package governor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cgroup value keys: memory in bytes, events as counts since the cgroup was
// made (the kernel's own counters).
const (
	KeyCgMemBytes  = "cg_mem_bytes"
	KeyCgPeakBytes = "cg_peak_bytes"
	KeyCgHigh      = "cg_high_events"
	KeyCgOOM       = "cg_oom_events"
	KeyCgOOMKill   = "cg_oom_kill"
)

// Cgroup reads the memory files of one cgroup directory, v1 or v2, whichever
// the directory holds. It reads files, not a cgroup library, so the same code
// runs on a copy of the layout in a test directory.
type Cgroup struct {
	name string
	mu   sync.Mutex
	dir  string
}

// NewCgroup returns a sensor for the cgroup at dir (for v1 the memory
// controller's directory, e.g. /sys/fs/cgroup/memory/rig/trial-1).
func NewCgroup(name, dir string) *Cgroup { return &Cgroup{name: name, dir: dir} }

// Name implements Sensor.
func (c *Cgroup) Name() string { return c.name }

// Retarget points the sensor at another cgroup directory, e.g. the cgroup
// of the execution about to start. Keep it pointed at a directory that
// exists while no trial runs (the runtimes' parent): a sensor that cannot
// read holds the queue.
func (c *Cgroup) Retarget(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir = dir
}

// Read implements Sensor.
func (c *Cgroup) Read(ctx context.Context) (Reading, error) {
	if err := ctx.Err(); err != nil {
		return Reading{}, err
	}
	c.mu.Lock()
	dir := c.dir
	c.mu.Unlock()
	v := map[string]float64{}
	if _, err := os.Stat(filepath.Join(dir, "memory.current")); err == nil {
		if err := readV2(dir, v); err != nil {
			return Reading{}, err
		}
	} else if _, err := os.Stat(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
		if err := readV1(dir, v); err != nil {
			return Reading{}, err
		}
	} else {
		return Reading{}, fmt.Errorf("cgroup %s: neither memory.current (v2) nor memory.usage_in_bytes (v1) is there", dir)
	}
	return Reading{Sensor: c.name, At: time.Now(), Values: v}, nil
}

func readV2(dir string, v map[string]float64) error {
	cur, err := readUint(filepath.Join(dir, "memory.current"))
	if err != nil {
		return err
	}
	v[KeyCgMemBytes] = float64(cur)
	// memory.peak appeared in Linux 5.19; older kernels lack it.
	if pk, err := readUint(filepath.Join(dir, "memory.peak")); err == nil {
		v[KeyCgPeakBytes] = float64(pk)
	}
	ev, err := readKeyed(filepath.Join(dir, "memory.events"))
	if err != nil {
		return err
	}
	v[KeyCgHigh] = float64(ev["high"])
	v[KeyCgOOM] = float64(ev["oom"])
	v[KeyCgOOMKill] = float64(ev["oom_kill"])
	return nil
}

func readV1(dir string, v map[string]float64) error {
	cur, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return err
	}
	v[KeyCgMemBytes] = float64(cur)
	if pk, err := readUint(filepath.Join(dir, "memory.max_usage_in_bytes")); err == nil {
		v[KeyCgPeakBytes] = float64(pk)
	}
	oc, err := readKeyed(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return err
	}
	// v1 has no high/oom event counters; under_oom is the live state and
	// oom_kill (Linux 4.13+) the count.
	v[KeyCgOOM] = float64(oc["under_oom"])
	v[KeyCgOOMKill] = float64(oc["oom_kill"])
	return nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// readKeyed parses the "key value" lines of memory.events / oom_control.
func readKeyed(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		out[f[0]] = n
	}
	return out, nil
}

// SelfCgroupDir returns the memory cgroup directory of the calling process:
// the v2 unified path or the v1 memory controller's path.
func SelfCgroupDir() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), "memory") {
			for _, d := range []string{filepath.Join("/sys/fs/cgroup/memory", parts[2]), "/sys/fs/cgroup/memory"} {
				if _, err := os.Stat(filepath.Join(d, "memory.usage_in_bytes")); err == nil {
					return d, nil
				}
			}
		}
		if parts[0] == "0" {
			v2 = filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	if v2 != "" {
		if _, err := os.Stat(filepath.Join(v2, "memory.current")); err == nil {
			return v2, nil
		}
	}
	return "", fmt.Errorf("no memory cgroup found for this process in /proc/self/cgroup")
}
