package preflight

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ErrNoCgroup means this machine offers no writable memory cgroup, so a
// simulated card cannot be enforced here.
var ErrNoCgroup = errors.New("no writable memory cgroup (simulated cards cannot be enforced)")

// Reservation is a memory cgroup that holds a runtime's whole process tree to
// a simulated card's size. It is a child of rig's own memory cgroup, named
// rig-<pid>-<n>, with swap capped to the same limit so swap cannot hide an
// overrun. A process joins by writing its pid to ProcsFile before it execs the
// runtime (see Command), so nothing escapes the limit.
type Reservation struct {
	name  string
	dir   string
	limit Size
	v1    cgroup1.Cgroup
	v2    *cgroup2.Manager
}

// OOM is what the kernel reports about out-of-memory in a reservation.
type OOM struct {
	Kills    uint64 `json:"kills"`     // processes the OOM killer ended
	Events   uint64 `json:"events"`    // times the limit was hit (v2 memory.events oom; v1 failcnt)
	UnderOOM bool   `json:"under_oom"` // v1: the group is stalled at its limit now
}

var staleName = regexp.MustCompile(`^rig-(\d+)-(\d+)$`)

// Reserve creates a reservation of limit bytes.
func Reserve(ctx context.Context, limit Size) (*Reservation, error) {
	if limit == 0 || limit > MaxSize {
		return nil, fmt.Errorf("preflight: reserve %s: %w", limit, ErrBadSize)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cgroups.Mode() == cgroups.Unified {
		return reserveV2(limit)
	}
	return reserveV1(limit)
}

// v1Parent is the directory of rig's own cgroup in the v1 hierarchy of
// controller and its path relative to that hierarchy's mount.
func v1Parent(controller string) (dir, rel string, err error) {
	paths, err := cgroup1.ParseCgroupFile("/proc/self/cgroup")
	if err != nil {
		return "", "", fmt.Errorf("%w: read /proc/self/cgroup: %w", ErrNoCgroup, err)
	}
	rel, ok := paths[controller]
	if !ok {
		return "", "", fmt.Errorf("%w: /proc/self/cgroup has no %s controller line", ErrNoCgroup, controller)
	}
	mount, mroot, err := v1Mount(controller)
	if err != nil {
		return "", "", err
	}
	if mroot != "/" {
		rel = strings.TrimPrefix(rel, mroot) // inside a container the mount root is our own group
	}
	return filepath.Join(mount, rel), rel, nil
}

// v1Mount finds where the v1 hierarchy of controller is mounted and which
// group is the mount's root, from /proc/self/mountinfo.
func v1Mount(controller string) (mount, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || b[0] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(b[2], ",") {
			if opt == controller {
				return a[4], a[3], nil
			}
		}
	}
	return "", "", fmt.Errorf("%w: no cgroup v1 %s hierarchy in /proc/self/mountinfo", ErrNoCgroup, controller)
}

// v2Parent is rig's own unified cgroup directory and its relative path.
func v2Parent() (dir, rel string, err error) {
	_, rel, err = cgroups.ParseCgroupFileUnified("/proc/self/cgroup")
	if err != nil || rel == "" {
		return "", "", fmt.Errorf("%w: read /proc/self/cgroup: %v", ErrNoCgroup, err)
	}
	return filepath.Join("/sys/fs/cgroup", rel), rel, nil
}

// nextName makes a directory rig-<pid>-<n> under parent, taking the first
// free n; the kernel's mkdir is the lock, so no counter is kept in memory.
// The caller owns the group it returns (and alone removes it): two callers at
// once never get the same name, since only one mkdir of a name succeeds.
func nextName(parent string) (string, error) {
	pid := os.Getpid()
	for n := 1; n < 10000; n++ {
		name := fmt.Sprintf("rig-%d-%d", pid, n)
		err := os.Mkdir(filepath.Join(parent, name), 0o755)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("%w: create %s: %w", ErrNoCgroup, filepath.Join(parent, name), err)
		}
	}
	return "", fmt.Errorf("%w: 10000 reservations already exist under %s (run CleanupStale)", ErrNoCgroup, parent)
}

func reserveV1(limit Size) (*Reservation, error) {
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
	cg, err := cgroup1.New(cgroup1.StaticPath(filepath.Join(rel, name)), res, cgroup1.WithHierarchy(hier))
	if err != nil && errors.Is(err, os.ErrNotExist) {
		// No swap accounting (memsw files absent): the memory limit alone
		// holds. The group stays made: removing it would free the name for
		// another caller between the two tries.
		res.Memory.Swap = nil
		cg, err = cgroup1.New(cgroup1.StaticPath(filepath.Join(rel, name)), res, cgroup1.WithHierarchy(hier))
	}
	if err != nil {
		_ = os.Remove(filepath.Join(parent, name))
		return nil, fmt.Errorf("%w: create %s: %w", ErrNoCgroup, filepath.Join(parent, name), err)
	}
	return &Reservation{name: name, dir: filepath.Join(parent, name), limit: limit, v1: cg}, nil
}

func reserveV2(limit Size) (*Reservation, error) {
	l, swap := int64(limit), int64(0)
	dir, m, err := v2Child("memory-limited", &cgroup2.Resources{Memory: &cgroup2.Memory{Max: &l, Swap: &swap}})
	if err != nil {
		return nil, err
	}
	return &Reservation{name: filepath.Base(dir), dir: dir, limit: limit, v2: m}, nil
}

// v2Child makes a group rig-<pid>-<n> with res under rig's own unified
// cgroup. A v2 group that holds processes cannot delegate controllers to
// children, so it goes beside rig's group when rig's own cannot host it.
func v2Child(what string, res *cgroup2.Resources) (string, *cgroup2.Manager, error) {
	parent, rel, err := v2Parent()
	if err != nil {
		return "", nil, err
	}
	for _, base := range []string{rel, filepath.Dir(rel)} {
		dir := filepath.Join("/sys/fs/cgroup", base)
		name, err := nextName(dir)
		if err != nil {
			return "", nil, err
		}
		m, err := cgroup2.NewManager("/sys/fs/cgroup", filepath.Join(base, name), res)
		if err != nil {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		return filepath.Join(dir, name), m, nil
	}
	return "", nil, fmt.Errorf("%w: cannot create a %s child of %s or its parent", ErrNoCgroup, what, parent)
}

// Name is rig-<pid>-<n>.
func (r *Reservation) Name() string { return r.name }

// Dir is the cgroup directory; the sandbox joins it before exec.
func (r *Reservation) Dir() string { return r.dir }

// ProcsFile is where a process writes its pid to join.
func (r *Reservation) ProcsFile() string { return filepath.Join(r.dir, "cgroup.procs") }

// Limit is the reserved size.
func (r *Reservation) Limit() Size { return r.limit }

// Version is 1 or 2.
func (r *Reservation) Version() int {
	if r.v2 != nil {
		return 2
	}
	return 1
}

// AddProc moves a running process in. Prefer Command, which joins before exec,
// since memory a process allocated before the move stays charged elsewhere.
func (r *Reservation) AddProc(pid int) error {
	var err error
	if r.v2 != nil {
		err = r.v2.AddProc(uint64(pid))
	} else {
		err = r.v1.Add(cgroup1.Process{Pid: pid})
	}
	if err != nil {
		return fmt.Errorf("preflight: add pid %d to %s: %w", pid, r.dir, err)
	}
	return nil
}

// Command returns a command that joins the reservation and then execs name,
// so the runtime and all its children start inside the limit.
func (r *Reservation) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	sh := append([]string{"-c", `echo $$ > "$0" && exec "$@"`, r.ProcsFile(), name}, args...)
	return exec.CommandContext(ctx, "/bin/sh", sh...)
}

// Peak is the highest memory use the group has seen (v1
// memory.max_usage_in_bytes, v2 memory.peak).
func (r *Reservation) Peak() (Size, error) {
	file := "memory.max_usage_in_bytes"
	if r.v2 != nil {
		file = "memory.peak"
	}
	v, err := readUintFile(filepath.Join(r.dir, file))
	if err != nil {
		return 0, fmt.Errorf("preflight: reservation peak: %w", err)
	}
	return Size(v), nil
}

// Usage is the current memory use.
func (r *Reservation) Usage() (Size, error) {
	file := "memory.usage_in_bytes"
	if r.v2 != nil {
		file = "memory.current"
	}
	v, err := readUintFile(filepath.Join(r.dir, file))
	return Size(v), err
}

// ResetPeak restarts the high-water mark (v1 only; v2 keeps it per group).
func (r *Reservation) ResetPeak() error {
	if r.v2 != nil {
		return nil
	}
	return os.WriteFile(filepath.Join(r.dir, "memory.max_usage_in_bytes"), []byte("0"), 0)
}

// OOM reads the kernel's out-of-memory record for the group.
func (r *Reservation) OOM() (OOM, error) {
	var o OOM
	if r.v2 != nil {
		kv, err := readKV(filepath.Join(r.dir, "memory.events"))
		if err != nil {
			return o, fmt.Errorf("preflight: reservation oom: %w", err)
		}
		o.Kills, o.Events = kv["oom_kill"], kv["oom"]
		return o, nil
	}
	st, err := r.v1.Stat(cgroup1.IgnoreNotExist)
	if err != nil {
		return o, fmt.Errorf("preflight: reservation oom: %w", err)
	}
	if c := st.GetMemoryOomControl(); c != nil {
		o.Kills, o.UnderOOM = c.GetOomKill(), c.GetUnderOom() == 1
	}
	if m := st.GetMemory(); m != nil && m.GetUsage() != nil {
		o.Events = m.GetUsage().GetFailcnt()
	}
	return o, nil
}

// Procs lists the pids inside.
func (r *Reservation) Procs() ([]int, error) { return readPids(r.ProcsFile()) }

// Close kills whatever still runs inside and removes the group.
func (r *Reservation) Close() error { return removeGroup(r.dir) }

// removeGroup SIGKILLs every process in dir, waits for the group to empty
// and removes it.
func removeGroup(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) // v2, kernels >= 5.14
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := readPids(filepath.Join(dir, "cgroup.procs"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("preflight: remove reservation %s: %w", dir, err)
		}
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("preflight: remove reservation %s: pids %v survive SIGKILL", dir, pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var err error
	for i := 0; i < 50; i++ { // rmdir can see EBUSY while the kernel reaps
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("preflight: remove reservation %s: %w", dir, err)
}

// CleanupStale removes reservations under rig's own cgroup whose owning rig
// process is dead, so a killed rig leaves nothing behind. It returns the
// directories it removed.
func CleanupStale(ctx context.Context) ([]string, error) {
	groups, err := List()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, full := range groups {
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		m := staleName.FindStringSubmatch(filepath.Base(full))
		pid, _ := strconv.Atoi(m[1])
		if pidAlive(pid) {
			continue
		}
		if err := removeGroup(full); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, full)
	}
	return removed, errors.Join(errs...)
}

// List returns the directories of every reservation under rig's own memory
// cgroup, live or stale, whichever rig process made them.
func List() ([]string, error) {
	var parent string
	var err error
	if cgroups.Mode() == cgroups.Unified {
		parent, _, err = v2Parent()
	} else {
		parent, _, err = v1Parent("memory")
	}
	if err != nil {
		return nil, err
	}
	dirs := []string{parent}
	if cgroups.Mode() == cgroups.Unified {
		dirs = append(dirs, filepath.Dir(parent))
	}
	var out []string
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && staleName.MatchString(e.Name()) {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out, nil
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func readUintFile(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return uint64(MaxSize), nil
	}
	return strconv.ParseUint(s, 10, 64)
}

func readKV(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		out[k] = n
	}
	return out, sc.Err()
}

func readPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}
