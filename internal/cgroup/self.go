package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/cgroups/v3"
)

// ErrNoCgroup means this machine offers no cgroup rig can use for the purpose
// asked (none mounted, no such controller, or not writable by this user).
var ErrNoCgroup = errors.New("no writable cgroup (simulated cards and cgroup caps cannot be enforced)")

// unifiedRoot is where the v2 hierarchy is mounted on a unified host.
const unifiedRoot = "/sys/fs/cgroup"

// unified reports whether the host runs the v2 hierarchy alone. A hybrid host
// (v1 controllers beside an empty v2 mount) counts as v1, since its
// controllers are there.
func unified() bool { return cgroups.Mode() == cgroups.Unified }

// parseProcCgroup reads /proc/<pid>/cgroup: the v2 path (the "0::" line) and
// the v1 path of each controller ("4:memory:/a/b", "1:name=systemd:/").
func parseProcCgroup(b []byte) (v2 string, v1 map[string]string) {
	v1 = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				v1[c] = parts[2]
			}
		}
	}
	return v2, v1
}

// parseMountinfo finds where the v1 hierarchy holding controller is mounted,
// and which group is the mount's root (not "/" inside a container that
// mounts only its own group).
func parseMountinfo(b []byte, controller string) (mount, root string, ok bool) {
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, found := strings.Cut(line, " - ")
		if !found {
			continue
		}
		a, f := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(f) < 3 || f[0] != "cgroup" {
			continue
		}
		if slices.Contains(strings.Split(f[2], ","), controller) {
			return a[4], a[3], true
		}
	}
	return "", "", false
}

// v1Parent is the directory of this process's group in the v1 hierarchy of
// controller, and its path relative to that hierarchy's mount.
func v1Parent(controller string) (dir, rel string, err error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	_, v1 := parseProcCgroup(b)
	rel, ok := v1[controller]
	if !ok {
		return "", "", fmt.Errorf("%w: /proc/self/cgroup has no %s controller line", ErrNoCgroup, controller)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	mount, mroot, ok := parseMountinfo(mi, controller)
	if !ok {
		return "", "", fmt.Errorf("%w: no cgroup v1 %s hierarchy in /proc/self/mountinfo", ErrNoCgroup, controller)
	}
	if mroot != "/" {
		rel = strings.TrimPrefix(rel, mroot) // inside a container the mount root is our own group
	}
	return filepath.Join(mount, rel), rel, nil
}

// v2Parent is this process's unified group directory and its relative path.
func v2Parent() (dir, rel string, err error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	rel, _ = parseProcCgroup(b)
	if rel == "" {
		return "", "", fmt.Errorf("%w: /proc/self/cgroup has no unified (0::) line", ErrNoCgroup)
	}
	return filepath.Join(unifiedRoot, rel), rel, nil
}

// parent is this process's group for controller on whichever hierarchy the
// host runs.
func parent(controller string) (dir, rel string, err error) {
	if unified() {
		return v2Parent()
	}
	return v1Parent(controller)
}

// SelfMemoryDir is the memory cgroup directory of the calling process (the
// unified group, or the v1 memory controller's group).
func SelfMemoryDir() (string, error) {
	dir, _, err := parent("memory")
	if err != nil {
		return "", err
	}
	if _, err := Version(dir); err != nil {
		return "", fmt.Errorf("%w: this process's group %s: %w", ErrNoCgroup, dir, err)
	}
	return dir, nil
}

// CPUs lists the CPUs this process may run on: its cpuset group's effective
// list, or every online CPU where no cpuset group is readable.
func CPUs() ([]int, error) {
	var paths []string
	if unified() {
		if dir, _, err := v2Parent(); err == nil {
			paths = append(paths, filepath.Join(dir, "cpuset.cpus.effective"))
		}
	} else if dir, _, err := v1Parent("cpuset"); err == nil {
		paths = append(paths, filepath.Join(dir, "cpuset.effective_cpus"))
	}
	paths = append(paths, "/sys/devices/system/cpu/online")
	var errs []error
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return parseCPUList(p, b)
	}
	return nil, errors.Join(errs...)
}
