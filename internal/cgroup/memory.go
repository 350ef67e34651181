package cgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrNotMemoryGroup means a directory holds neither v2 nor v1 memory files.
var ErrNotMemoryGroup = errors.New("not a memory cgroup")

// Memory is one reading of a memory cgroup's counters, in bytes and events.
type Memory struct {
	Version    int    // 1 or 2: which files it was read from
	Current    uint64 // memory charged to the group now
	Peak       uint64 // the high-water mark since the group was made or last reset
	HasPeak    bool   // false on v2 kernels before 5.19, which have no memory.peak
	HighEvents uint64 // v2: times usage went over memory.high; v1 has none
	OOM        OOM
}

// OOM is what the kernel reports about out-of-memory in a group.
type OOM struct {
	Kills    uint64 `json:"kills"`     // processes the OOM killer ended (v1: Linux 4.13+)
	Events   uint64 `json:"events"`    // times the limit was hit (v2 memory.events oom; v1 memory.failcnt, which some kernels leave at 0)
	UnderOOM bool   `json:"under_oom"` // v1: the group is stalled at its limit now; v2 never stalls
}

// Version says which memory files dir holds: 2 (memory.current) or 1
// (memory.usage_in_bytes).
func Version(dir string) (int, error) {
	if _, err := os.Stat(filepath.Join(dir, "memory.current")); err == nil {
		return 2, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
		return 1, nil
	}
	return 0, fmt.Errorf("%s: %w: neither memory.current (v2) nor memory.usage_in_bytes (v1) is there", dir, ErrNotMemoryGroup)
}

// ReadMemory reads the memory counters of the group at dir, v1 or v2,
// whichever files it holds.
func ReadMemory(dir string) (Memory, error) {
	v, err := Version(dir)
	if err != nil {
		return Memory{}, err
	}
	if v == 2 {
		return readMemoryV2(dir)
	}
	return readMemoryV1(dir)
}

func readMemoryV2(dir string) (Memory, error) {
	m := Memory{Version: 2}
	var err error
	if m.Current, err = readCounter(filepath.Join(dir, "memory.current")); err != nil {
		return m, err
	}
	m.Peak, err = readCounter(filepath.Join(dir, "memory.peak"))
	switch {
	case err == nil:
		m.HasPeak = true
	case !errors.Is(err, os.ErrNotExist): // absent before Linux 5.19
		return m, err
	}
	ev, err := readKeyed(filepath.Join(dir, "memory.events"))
	if err != nil {
		return m, err
	}
	m.HighEvents, m.OOM.Events, m.OOM.Kills = ev["high"], ev["oom"], ev["oom_kill"]
	return m, nil
}

func readMemoryV1(dir string) (Memory, error) {
	m := Memory{Version: 1, HasPeak: true}
	var err error
	if m.Current, err = readCounter(filepath.Join(dir, "memory.usage_in_bytes")); err != nil {
		return m, err
	}
	if m.Peak, err = readCounter(filepath.Join(dir, "memory.max_usage_in_bytes")); err != nil {
		return m, err
	}
	oc, err := readKeyed(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return m, err
	}
	m.OOM.Kills, m.OOM.UnderOOM = oc["oom_kill"], oc["under_oom"] == 1
	// failcnt is the one v1 count of limit hits. The governor's fault
	// harness lays out a group without it, so absent reads as none.
	m.OOM.Events, err = readCounter(filepath.Join(dir, "memory.failcnt"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return m, err
	}
	return m, nil
}

// MemoryMax is the group's memory limit (v2 memory.max, v1
// memory.limit_in_bytes); Unlimited where there is none.
func MemoryMax(dir string) (uint64, error) {
	v, err := Version(dir)
	if err != nil {
		return 0, err
	}
	if v == 2 {
		return readLimit(filepath.Join(dir, "memory.max"))
	}
	return readLimit(filepath.Join(dir, "memory.limit_in_bytes"))
}

// Window measures a group's peak memory from the moment it was opened, so a
// peak read for one call is not the peak of an earlier one. On v1 opening
// resets memory.max_usage_in_bytes for every reader. On v2 the reset holds
// for this Window's own open file of memory.peak alone (Linux 6.12+); on
// older v2 kernels the reset is refused and the Window reads the group's
// peak since it was made, which SinceOpen reports.
type Window struct {
	path  string
	f     *os.File // v2: the file the reset belongs to
	since bool
}

// OpenWindow starts a peak measurement of the group at dir.
func OpenWindow(dir string) (*Window, error) {
	v, err := Version(dir)
	if err != nil {
		return nil, err
	}
	if v == 1 {
		path := filepath.Join(dir, "memory.max_usage_in_bytes")
		if err := os.WriteFile(path, []byte("0"), 0); err != nil {
			return nil, fmt.Errorf("cgroup: reset %s: %w", path, err)
		}
		return &Window{path: path, since: true}, nil
	}
	path := filepath.Join(dir, "memory.peak")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		if _, err := f.Write([]byte("reset\n")); err == nil {
			return &Window{path: path, f: f, since: true}, nil
		}
		_ = f.Close()
	}
	// Before 6.12 memory.peak cannot be written (and before 5.19 it is
	// absent, which the read below reports).
	f, err = os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: open %s: %w", path, err)
	}
	return &Window{path: path, f: f}, nil
}

// SinceOpen reports whether Peak counts from the Window's opening (true) or
// from the group's making (false: a v2 kernel before 6.12).
func (w *Window) SinceOpen() bool { return w.since }

// Peak is the highest memory use in the window so far.
func (w *Window) Peak() (uint64, error) {
	if w.f == nil {
		return readCounter(w.path)
	}
	b, err := io.ReadAll(io.NewSectionReader(w.f, 0, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("cgroup: read %s: %w", w.path, err)
	}
	return parseCounter(w.path, b)
}

// Close releases the Window's file.
func (w *Window) Close() error {
	if w.f == nil {
		return nil
	}
	return w.f.Close()
}
