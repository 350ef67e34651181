package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// MaxLimit is the largest reservation rig makes (1 TiB); larger is a typo.
const MaxLimit = 1 << 40

// ErrBadLimit marks a reservation size that is zero or above MaxLimit.
var ErrBadLimit = errors.New("bad reservation size")

// Reservation is a memory cgroup that holds a runtime's whole process tree to
// a size (a simulated card's). It is a child of rig's own memory cgroup,
// named rig-<pid>-<n>, with swap capped to the same limit so swap cannot hide
// an overrun. A process joins by writing its pid to ProcsFile before it execs
// the runtime (see Command), so nothing escapes the limit.
type Reservation struct {
	name    string
	dir     string
	limit   uint64
	version int
	window  *Window // from ResetPeak
}

// Reserve creates a reservation of limit bytes.
func Reserve(ctx context.Context, limit uint64) (*Reservation, error) {
	if limit == 0 || limit > MaxLimit {
		return nil, fmt.Errorf("cgroup: reserve %d bytes: %w (must be 1..%d)", limit, ErrBadLimit, uint64(MaxLimit))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if unified() {
		l, swap := int64(limit), int64(0)
		dir, err := v2Child("memory-limited", &cgroup2.Resources{Memory: &cgroup2.Memory{Max: &l, Swap: &swap}})
		if err != nil {
			return nil, err
		}
		return &Reservation{name: filepath.Base(dir), dir: dir, limit: limit, version: 2}, nil
	}
	return reserveV1(limit)
}

func reserveV1(limit uint64) (*Reservation, error) {
	parent, rel, err := v1Parent("memory")
	if err != nil {
		return nil, err
	}
	name, err := nextName(parent)
	if err != nil {
		return nil, err
	}
	l := int64(limit)
	res := &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &l, Swap: &l}}
	hier := cgroup1.SingleSubsystem(cgroup1.Default, cgroup1.Memory)
	_, err = cgroup1.New(cgroup1.StaticPath(filepath.Join(rel, name)), res, cgroup1.WithHierarchy(hier))
	if err != nil && errors.Is(err, os.ErrNotExist) {
		// No swap accounting (memsw files absent): the memory limit alone
		// holds. The group stays made: removing it would free the name for
		// another caller between the two tries.
		res.Memory.Swap = nil
		_, err = cgroup1.New(cgroup1.StaticPath(filepath.Join(rel, name)), res, cgroup1.WithHierarchy(hier))
	}
	if err != nil {
		_ = os.Remove(filepath.Join(parent, name))
		return nil, fmt.Errorf("%w: create %s: %w", ErrNoCgroup, filepath.Join(parent, name), err)
	}
	return &Reservation{name: name, dir: filepath.Join(parent, name), limit: limit, version: 1}, nil
}

// v2Child makes a group rig-<pid>-<n> with res under rig's own unified
// cgroup. A v2 group that holds processes cannot delegate controllers to
// children, so it goes beside rig's group when rig's own cannot host it.
func v2Child(what string, res *cgroup2.Resources) (string, error) {
	parent, rel, err := v2Parent()
	if err != nil {
		return "", err
	}
	for _, base := range []string{rel, filepath.Dir(rel)} {
		dir := filepath.Join(unifiedRoot, base)
		name, err := nextName(dir)
		if err != nil {
			return "", err
		}
		if _, err := cgroup2.NewManager(unifiedRoot, filepath.Join(base, name), res); err != nil {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		return filepath.Join(dir, name), nil
	}
	return "", fmt.Errorf("%w: cannot create a %s child of %s or its parent", ErrNoCgroup, what, parent)
}

// Name is rig-<pid>-<n>.
func (r *Reservation) Name() string { return r.name }

// Dir is the cgroup directory; the sandbox joins it before exec.
func (r *Reservation) Dir() string { return r.dir }

// ProcsFile is where a process writes its pid to join.
func (r *Reservation) ProcsFile() string { return filepath.Join(r.dir, "cgroup.procs") }

// Limit is the reserved size in bytes.
func (r *Reservation) Limit() uint64 { return r.limit }

// Version is 1 or 2.
func (r *Reservation) Version() int { return r.version }

// Command returns a command that joins the reservation and then execs name,
// so the runtime and all its children start inside the limit.
func (r *Reservation) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	sh := append([]string{"-c", `echo $$ > "$0" && exec "$@"`, r.ProcsFile(), name}, args...)
	return exec.CommandContext(ctx, "/bin/sh", sh...)
}

// Memory reads the group's counters.
func (r *Reservation) Memory() (Memory, error) { return ReadMemory(r.dir) }

// Peak is the highest memory use since the last ResetPeak, or since the group
// was made.
func (r *Reservation) Peak() (uint64, error) {
	if r.window != nil {
		return r.window.Peak()
	}
	m, err := ReadMemory(r.dir)
	if err != nil {
		return 0, fmt.Errorf("cgroup: reservation peak: %w", err)
	}
	if !m.HasPeak {
		return 0, fmt.Errorf("cgroup: reservation peak: %s has no memory.peak (Linux 5.19+)", r.dir)
	}
	return m.Peak, nil
}

// ResetPeak starts a new peak window (see Window for what v2 kernels before
// 6.12 can do).
func (r *Reservation) ResetPeak() error {
	if r.window != nil {
		_ = r.window.Close()
		r.window = nil
	}
	w, err := OpenWindow(r.dir)
	if err != nil {
		return err
	}
	r.window = w
	return nil
}

// OOM reads the kernel's out-of-memory record for the group.
func (r *Reservation) OOM() (OOM, error) {
	m, err := ReadMemory(r.dir)
	if err != nil {
		return OOM{}, fmt.Errorf("cgroup: reservation oom: %w", err)
	}
	return m.OOM, nil
}

// Close kills whatever still runs inside and removes the group.
func (r *Reservation) Close() error {
	if r.window != nil {
		_ = r.window.Close()
		r.window = nil
	}
	return remove(r.dir)
}
