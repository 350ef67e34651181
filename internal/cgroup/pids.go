package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// PidsGroup caps how many tasks (processes and threads) one contained tree may
// hold, so a fork bomb stops at the cap instead of at the machine's. Unlike a
// per-user rlimit it counts only this tree.
type PidsGroup struct {
	dir   string
	owned bool // false when the cap was written into a v2 group made for memory
}

// NewPidsGroup makes a pids cgroup capped at max tasks. On the unified
// hierarchy a process can be in one group only, so when memoryDir (a v2
// Reservation's group) is given the cap is written there instead.
func NewPidsGroup(max int, memoryDir string) (*PidsGroup, error) {
	if max <= 0 {
		return nil, fmt.Errorf("cgroup: pids cap %d: must be positive", max)
	}
	if unified() {
		if memoryDir != "" {
			if err := os.WriteFile(filepath.Join(memoryDir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
				return nil, fmt.Errorf("%w: writing pids.max in %s: %w", ErrNoCgroup, memoryDir, err)
			}
			return &PidsGroup{dir: memoryDir}, nil
		}
		dir, err := v2Child("pids-limited", &cgroup2.Resources{Pids: &cgroup2.Pids{Max: int64(max)}})
		if err != nil {
			return nil, err
		}
		return &PidsGroup{dir: dir, owned: true}, nil
	}
	parent, rel, err := v1Parent("pids")
	if err != nil {
		return nil, err
	}
	name, err := nextName(parent)
	if err != nil {
		return nil, err
	}
	hier := cgroup1.SingleSubsystem(cgroup1.Default, cgroup1.Pids)
	limit := int64(max)
	res := &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: &limit}}
	if _, err := cgroup1.New(cgroup1.StaticPath(filepath.Join(rel, name)), res, cgroup1.WithHierarchy(hier)); err != nil {
		_ = os.Remove(filepath.Join(parent, name))
		return nil, fmt.Errorf("%w: create %s: %w", ErrNoCgroup, filepath.Join(parent, name), err)
	}
	return &PidsGroup{dir: filepath.Join(parent, name), owned: true}, nil
}

// Dir is the group's directory.
func (g *PidsGroup) Dir() string { return g.dir }

// Max is the group's task cap (pids.max); Unlimited where there is none.
func (g *PidsGroup) Max() (uint64, error) { return readLimit(filepath.Join(g.dir, "pids.max")) }

// Refused counts the forks and clones the kernel refused at the cap
// (pids.events "max"): more than zero means the tree hit it.
func (g *PidsGroup) Refused() (uint64, error) {
	kv, err := readKeyed(filepath.Join(g.dir, "pids.events"))
	if err != nil {
		return 0, fmt.Errorf("cgroup: pids events: %w", err)
	}
	return kv["max"], nil
}

// Close kills what still runs inside and removes the group (a group written
// into a memory Reservation is removed with that reservation).
func (g *PidsGroup) Close() error {
	if !g.owned {
		return nil
	}
	if err := remove(g.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
