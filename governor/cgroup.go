package governor

import (
	"context"
	"sync"
	"time"

	"rig/internal/cgroup"
)

// Cgroup value keys: memory in bytes, events as counts since the cgroup was
// made (the kernel's own counters).
const (
	KeyCgMemBytes  = "cg_mem_bytes"
	KeyCgPeakBytes = "cg_peak_bytes"
	KeyCgHigh      = "cg_high_events"
	KeyCgOOM       = "cg_oom_events" // v2 memory.events oom; v1 under_oom (the live stall, 0 or 1)
	KeyCgOOMKill   = "cg_oom_kill"
)

// Cgroup reads the memory files of one cgroup directory, v1 or v2, whichever
// the directory holds, through internal/cgroup (plain files, so the same code
// runs on a copy of the layout in a test directory).
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
	m, err := cgroup.ReadMemory(dir)
	if err != nil {
		return Reading{}, err
	}
	v := map[string]float64{KeyCgMemBytes: float64(m.Current), KeyCgOOMKill: float64(m.OOM.Kills)}
	if m.HasPeak {
		v[KeyCgPeakBytes] = float64(m.Peak)
	}
	if m.Version == 2 {
		v[KeyCgHigh], v[KeyCgOOM] = float64(m.HighEvents), float64(m.OOM.Events)
	} else if m.OOM.UnderOOM {
		v[KeyCgOOM] = 1
	} else {
		v[KeyCgOOM] = 0
	}
	return Reading{Sensor: c.name, At: time.Now(), Values: v}, nil
}

// SelfCgroupDir returns the memory cgroup directory of the calling process:
// the v2 unified path or the v1 memory controller's path.
func SelfCgroupDir() (string, error) { return cgroup.SelfMemoryDir() }
