package runtimes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"rig/internal/cgroup"
)

// prepareContainedWorld settles, before any stage starts, everything the
// contained process will see: the PATH it can use and the binary it names,
// the install folders to bind read-only, the identity it runs as (and the
// ownership of its writable folders), and the cgroups of its limits.
func prepareContainedWorld(ctx context.Context, spec *SandboxSpec) (*treeLimits, error) {
	if err := resolveContainedBinary(spec); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		uid, gid, name, err := sandboxIdentity()
		if err != nil {
			return nil, fmt.Errorf("sandbox: %v: %w", err, ErrNoSandbox)
		}
		spec.SandboxUID, spec.SandboxGID, spec.SandboxUser = uid, gid, name
		for _, p := range spec.ReadOnly {
			if err := readableBy(p, uid); err != nil {
				return nil, err
			}
		}
	}
	writable, err := makeWritableFolders(spec)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "rig-root-")
	if err != nil {
		return nil, err
	}
	spec.Root = root
	tl := &treeLimits{limits: spec.Limits, scratch: writable, root: root, stop: make(chan struct{})}
	if err := tl.makeGroups(ctx, spec); err != nil {
		tl.close()
		return nil, err
	}
	switch {
	case spec.Limits.ScratchBytes <= 0:
	case os.Geteuid() == 0:
		// The exact cap: the writable folders live on a tmpfs of that size
		// while the sandbox runs (scratch.go).
		if tl.scratchFS, err = newScratchFS(writable, spec.Limits.ScratchBytes); err != nil {
			tl.close()
			return nil, err
		}
	default:
		// Without root no filesystem can be mounted on the host: the
		// folders are watched from outside instead (watch).
		tl.base = treeBytes(writable)
	}
	return tl, nil
}

// resolveContainedBinary narrows spec's PATH to the folders the contained
// process can see, finds the binary there, and adds its install folders to
// the read-only binds.
func resolveContainedBinary(spec *SandboxSpec) error {
	// spec.ReadOnly grows below, and a folder added once counts as visible.
	visible := func(p string) bool {
		for _, root := range append(append(append([]string{}, systemDirs...), spec.ReadOnly...), append(spec.Writable, spec.Dir)...) {
			if root != "" && within(p, root) {
				return true
			}
		}
		return false
	}
	var path []string
	for _, kv := range spec.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(v) {
				if filepath.IsAbs(d) && visible(d) {
					path = append(path, d)
				}
			}
		}
	}
	if len(path) == 0 {
		path = []string{"/usr/local/bin", "/usr/bin", "/bin"}
	}
	bin, err := lookPathIn(spec.Argv[0], path)
	if err != nil {
		return fmt.Errorf("%s: %w: not found in the contained PATH %s (run make setup, or check `rig runtimes check`)", spec.Argv[0], ErrBinaryMissing, strings.Join(path, ":"))
	}
	spec.Argv = append([]string{bin}, spec.Argv[1:]...)
	for _, p := range programFiles(bin) {
		if prefix := installPrefix(p); !visible(prefix) {
			spec.ReadOnly = append(spec.ReadOnly, prefix)
		}
	}
	for i, kv := range spec.Env {
		if strings.HasPrefix(kv, "PATH=") {
			spec.Env[i] = "PATH=" + strings.Join(path, ":")
		}
	}
	return nil
}

// makeWritableFolders creates spec's working and writable folders and, as
// root, hands them to the sandbox's identity.
func makeWritableFolders(spec *SandboxSpec) ([]string, error) {
	var writable []string
	for _, p := range append([]string{spec.Dir}, spec.Writable...) {
		if p == "" {
			continue
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, err
		}
		if os.Geteuid() == 0 {
			if err := chownTree(p, spec.SandboxUID, spec.SandboxGID); err != nil {
				return nil, fmt.Errorf("sandbox: handing %s to %s: %w", p, spec.SandboxUser, err)
			}
		}
		writable = append(writable, p)
	}
	return writable, nil
}

// within reports whether p is root or inside it.
func within(p, root string) bool {
	p, root = filepath.Clean(p), filepath.Clean(root)
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

func lookPathIn(name string, path []string) (string, error) {
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		if fi, err := os.Stat(abs); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", os.ErrNotExist
		}
		return abs, nil
	}
	for _, d := range path {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// programFiles is the binary, what its symlinks lead to, and for a script its
// interpreter the same way (a virtualenv's python links to the Python it was
// made from, which lives elsewhere).
func programFiles(bin string) []string {
	out := []string{bin}
	if real, err := filepath.EvalSymlinks(bin); err == nil && real != bin {
		out = append(out, real)
	}
	f, err := os.Open(bin)
	if err != nil {
		return out
	}
	defer f.Close()
	// The kernel reads no more of a "#!" line than 256 bytes; the file may
	// lie in a tree a contained process wrote.
	line, _ := bufio.NewReader(io.LimitReader(f, 256)).ReadString('\n')
	if rest, ok := strings.CutPrefix(line, "#!"); ok {
		if fields := strings.Fields(rest); len(fields) > 0 && filepath.IsAbs(fields[0]) {
			out = append(out, fields[0])
			if real, err := filepath.EvalSymlinks(fields[0]); err == nil && real != fields[0] {
				out = append(out, real)
			}
		}
	}
	return out
}

// installPrefix is the folder a program was installed into: the parent of its
// bin folder, or its own folder. Libraries and data sit there.
func installPrefix(p string) string {
	d := filepath.Dir(p)
	if b := filepath.Base(d); b == "bin" || b == "sbin" {
		return filepath.Dir(d)
	}
	return d
}

// readableBy refuses a read-only path the sandbox user could not read, naming
// the fix, rather than letting the runtime fail inside with a bare EACCES.
func readableBy(p string, uid int) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil && int(st.Uid) == uid {
		return nil
	}
	need := fs.FileMode(0o004)
	if fi.IsDir() {
		need = 0o005
	}
	if fi.Mode().Perm()&need != need {
		return fmt.Errorf("sandbox: %s (mode %04o) is not readable by the sandbox user %s: make it world-readable (chmod o+r%s %s), or pass --no-sandbox, which every receipt records",
			p, fi.Mode().Perm(), SandboxUserName, map[bool]string{true: "X -R", false: ""}[fi.IsDir()], p)
	}
	return nil
}

// chownTree hands a writable folder to the sandbox user. Symlinks are changed
// themselves, never followed: a link left by an earlier contained run must not
// make rig chown a file outside.
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// treeBytes is the apparent size of everything under the folders.
func treeBytes(dirs []string) int64 {
	var n int64
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if e.Type().IsRegular() {
				if fi, err := e.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
	}
	return n
}

// treeLimits holds what enforces one contained tree's Limits from outside:
// its cgroups and the watch on its writable folders.
type treeLimits struct {
	limits  Limits
	memory  *cgroup.Reservation // made here when the tree had no memory cgroup
	pids    *cgroup.PidsGroup
	scratch []string
	base    int64
	root    string
	// scratchFS holds the writable folders while the tree runs, as root;
	// without it the folders are polled (watch).
	scratchFS *scratchFS

	mu         sync.Mutex
	scratchHit bool
	stop       chan struct{}
	stopOnce   sync.Once
}

func (t *treeLimits) makeGroups(ctx context.Context, spec *SandboxSpec) error {
	if spec.Limits.MemoryBytes > 0 && spec.CgroupDir == "" {
		res, err := cgroup.Reserve(ctx, uint64(spec.Limits.MemoryBytes))
		if err != nil && !errors.Is(err, cgroup.ErrNoCgroup) {
			return err
		}
		if err == nil {
			t.memory = res
			spec.CgroupDir = res.Dir()
		}
		// Without a memory cgroup the exec stage caps the address space instead.
	}
	if spec.Limits.Processes > 0 {
		g, err := cgroup.NewPidsGroup(spec.Limits.Processes, spec.CgroupDir)
		if err != nil && !errors.Is(err, cgroup.ErrNoCgroup) {
			return err
		}
		if err == nil {
			t.pids = g
			spec.PidsCgroupDir = g.Dir()
		}
		// Without a pids cgroup the exec stage sets RLIMIT_NPROC.
	}
	return nil
}

// watch polls the writable folders while the tree runs and ends the tree once
// they have grown by more than ScratchBytes: the fallback without root, where
// no scratch filesystem can be mounted. Polling lets a fast writer pass the
// cap by what it writes in one interval, and it counts only files it can
// list (not one unlinked while held open, nor links); RLIMIT_FSIZE bounds
// each file.
//
// With a scratch filesystem the kernel holds the cap (a write past it gets
// ENOSPC) and the watch ends the tree once it is full, as it ends it past
// the cap without one: a program that loops on the failed write must not run
// on until its wall cap, and the limit is named either way.
func (t *treeLimits) watch(sb *Sandbox) {
	if t.limits.ScratchBytes <= 0 {
		return
	}
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sb.done:
				return
			case <-t.stop:
				return
			case <-tick.C:
				var over bool
				if t.scratchFS != nil {
					over = t.scratchFS.full()
				} else {
					over = treeBytes(t.scratch)-t.base > t.limits.ScratchBytes
				}
				if over {
					t.mu.Lock()
					t.scratchHit = true
					t.mu.Unlock()
					_ = syscall.Kill(-sb.cmd.Process.Pid, syscall.SIGKILL)
					return
				}
			}
		}
	}()
}

// hit names the limit that ended the tree, read from the kernel's own
// counters, or "" when none did.
func (t *treeLimits) hit(waitErr error) string {
	t.mu.Lock()
	scratch := t.scratchHit
	t.mu.Unlock()
	if scratch || t.scratchFS.full() {
		return "scratch_bytes"
	}
	if t.pids != nil {
		if n, err := t.pids.Refused(); err == nil && n > 0 {
			return "processes"
		}
	}
	if t.memory != nil {
		if o, err := t.memory.OOM(); err == nil && o.Kills > 0 {
			return "memory"
		}
	}
	var ee interface{ ExitCode() int }
	if errors.As(waitErr, &ee) {
		switch ee.ExitCode() {
		case 128 + int(syscall.SIGXCPU):
			return "cpu_time"
		case 128 + int(syscall.SIGXFSZ):
			return "file_size"
		}
	}
	return ""
}

// releaseScratch puts what the ended tree wrote back in its folders on the
// host's disk; the caller reads them as soon as Done is closed.
func (t *treeLimits) releaseScratch() error {
	return t.scratchFS.release()
}

func (t *treeLimits) close() {
	t.stopOnce.Do(func() { close(t.stop) })
	// A tree that never ran left its folders as they were underneath.
	t.scratchFS.abandon()
	if t.pids != nil {
		_ = t.pids.Close()
	}
	if t.memory != nil {
		_ = t.memory.Close()
	}
	if t.root != "" {
		_ = os.Remove(t.root)
	}
}

// LimitHit names the limit that ended the sandbox ("processes", "memory",
// "cpu_time", "file_size", "scratch_bytes"), or "" when none did. It is
// meaningful once Done is closed.
func (s *Sandbox) LimitHit() string {
	<-s.done
	return s.limitHit
}

// errRuntimeGone says the sandbox ended before its runtime's pid was read.
var errRuntimeGone = errors.New("the sandbox ended before its runtime's pid was read")

// hostChildPID finds init's one child as the host numbers it. A Go process
// forks from any of its threads, so every thread's children list is read.
// It returns errRuntimeGone once initDone is closed with no child found.
func hostChildPID(initPID int, initDone <-chan struct{}) (int, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", initPID))
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if fields := strings.Fields(string(b)); len(fields) > 0 {
				return strconv.Atoi(fields[0])
			}
		}
		select {
		case <-initDone:
			return 0, errRuntimeGone
		default:
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("init (pid %d) lists no child", initPID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
