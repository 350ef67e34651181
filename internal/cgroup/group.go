package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// groupName is the name of every group rig makes: rig-<pid of the maker>-<n>.
var groupName = regexp.MustCompile(`^rig-(\d+)-(\d+)$`)

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
	return "", fmt.Errorf("%w: 10000 groups already exist under %s (run CleanupStale)", ErrNoCgroup, parent)
}

// Join moves process pid into the group at dir. A process should join before
// it execs what it contains, since memory it allocated before the move stays
// charged to its old group.
func Join(dir string, pid int) error {
	path := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(path, []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("cgroup: join %s: %w", dir, err)
	}
	return nil
}

// remove SIGKILLs every process in dir, waits for the group to empty and
// removes it. A group that is already gone is no error.
func remove(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) // v2, Linux 5.14+
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := Procs(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cgroup: remove %s: %w", dir, err)
		}
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: remove %s: pids %v survive SIGKILL", dir, pids)
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
	return fmt.Errorf("cgroup: remove %s: %w", dir, err)
}

// List returns the directories of every memory group rig made under this
// process's own memory group (and, on v2, beside it), live or stale,
// whichever rig process made them.
func List() ([]string, error) {
	p, _, err := parent("memory")
	if err != nil {
		return nil, err
	}
	dirs := []string{p}
	if unified() {
		dirs = append(dirs, filepath.Dir(p)) // where v2Child puts a group rig's own cannot host
	}
	var out []string
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && groupName.MatchString(e.Name()) {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out, nil
}

// CleanupStale removes the groups rig made whose making rig process is dead,
// so a killed rig leaves nothing behind. It returns the directories it
// removed.
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
		m := groupName.FindStringSubmatch(filepath.Base(full))
		pid, _ := strconv.Atoi(m[1])
		if pidAlive(pid) {
			continue
		}
		if err := remove(full); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, full)
	}
	return removed, errors.Join(errs...)
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
