package runtimes

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Confinement is what a contained process was left with, read back from inside
// it just before it became the runtime (its own uid, mount table, limits and
// process namespace), so a receipt shows the containment as it was, not as it
// was asked for.
type Confinement struct {
	User             string   `json:"user"` // the identity it runs as, e.g. "rig-sandbox (uid 998, gid 998)"
	UID              int      `json:"uid"`
	GID              int      `json:"gid"`
	NoNewPrivs       bool     `json:"no_new_privs"`
	Capabilities     string   `json:"capabilities"` // CapEff from /proc/self/status; 0000000000000000 is none
	PIDNamespace     string   `json:"pid_namespace"`
	VisibleProcesses int      `json:"visible_processes"` // entries in its own /proc
	Writable         []string `json:"writable"`          // mount points it may write, from its own mountinfo
	ReadOnly         []string `json:"read_only"`         // host paths bound read-only beyond the system folders
	Limits           Limits   `json:"limits"`            // as read back (rlimits) or written (cgroups)
	// Seccomp is the mode /proc/self/status reports: "filter" once the
	// sandbox's filter is loaded (see seccomp.go).
	Seccomp string   `json:"seccomp"`
	Devices []string `json:"devices"` // the device nodes in its /dev; GPU nodes only for a runtime on a card
	// Landlock is the second wall for writes (landlock.go), in one line;
	// empty where the kernel has no Landlock.
	Landlock string `json:"landlock,omitempty"`
}

// Limits caps one contained process tree. Zero is "no cap" for a field.
type Limits struct {
	Processes    int   `json:"processes,omitempty"`     // tasks in the tree: a pids cgroup, else RLIMIT_NPROC for the sandbox user
	MemoryBytes  int64 `json:"memory_bytes,omitempty"`  // a memory cgroup made for the tree when it has none (graders)
	CPUSeconds   int   `json:"cpu_seconds,omitempty"`   // RLIMIT_CPU of each process
	OpenFiles    int   `json:"open_files,omitempty"`    // RLIMIT_NOFILE
	FileBytes    int64 `json:"file_bytes,omitempty"`    // RLIMIT_FSIZE: the largest file it may write
	ScratchBytes int64 `json:"scratch_bytes,omitempty"` // what its writable folders may grow by, watched from outside
	TmpBytes     int64 `json:"tmp_bytes,omitempty"`     // size of its private /tmp and /dev/shm
}

const (
	kib = int64(1) << 10
	mib = kib << 10
	gib = mib << 10
)

// RuntimeLimits are the caps of a runtime server. Memory is the card's (its
// cgroup); the model store grows by the model's size on import, so writes are
// not capped by size.
func RuntimeLimits() Limits {
	return Limits{Processes: 4096, OpenFiles: 8192, TmpBytes: 256 * mib}
}

// CommandLimits are the caps of a test command (the code grader, tasks lint
// and audit): what a small repository's tests need, many times over.
func CommandLimits() Limits {
	return Limits{Processes: 256, MemoryBytes: 2 * gib, CPUSeconds: 300, OpenFiles: 1024,
		FileBytes: 256 * mib, ScratchBytes: 512 * mib, TmpBytes: 256 * mib}
}

// AiderLimits are the caps of one Aider run, which also runs the task's tests.
func AiderLimits() Limits {
	return Limits{Processes: 512, MemoryBytes: 4 * gib, CPUSeconds: 1800, OpenFiles: 4096,
		FileBytes: 256 * mib, ScratchBytes: gib, TmpBytes: 256 * mib}
}

// SandboxUserName is the unprivileged account setup creates for contained
// processes. Where it does not exist, nobody is used, and the receipt says so.
const SandboxUserName = "rig-sandbox"

// sandboxIdentity is the uid and gid a contained process runs as.
func sandboxIdentity() (uid, gid int, name string, err error) {
	for _, n := range []string{SandboxUserName, "nobody"} {
		u, err := user.Lookup(n)
		if err != nil {
			continue
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if uid == 0 {
			continue
		}
		return uid, gid, n, nil
	}
	return 0, 0, "", fmt.Errorf("no unprivileged account to run contained processes as: create %s (make setup does, as root)", SandboxUserName)
}

// systemDirs are the host folders every contained process sees read-only:
// the programs and libraries of the distribution and its configuration. rig's
// home, the cache and /root are not among them; what a job needs from there
// is bound one path at a time.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// devNodes are the device files every contained process gets. No tty: a
// contained process has no terminal, and /dev/tty would reach the terminal
// of whoever started rig (see StartSandbox's session).
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// confine builds the contained process's world and drops its rights. It runs
// in the exec stage, as root of its own mount namespace (and user namespace
// when rig is not root), on the locked main thread: rights that are per thread
// (no_new_privs, capabilities) are set on the thread that then calls execve.
func confine(spec SandboxSpec) (*Confinement, error) {
	root := spec.Root
	if root == "" {
		return nil, errors.New("no root folder given for the contained world")
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making the mount namespace private: %w", err)
	}
	if err := buildContainedRoot(spec, root); err != nil {
		return nil, err
	}
	if err := pivotIntoRoot(root); err != nil {
		return nil, err
	}
	dir := cmp.Or(spec.Dir, "/tmp")
	if err := os.Chdir(dir); err != nil {
		return nil, err
	}
	if err := setRlimits(spec.Limits, spec.PidsCgroupDir == "", spec.CgroupDir == ""); err != nil {
		return nil, err
	}
	if err := dropRights(spec); err != nil {
		return nil, err
	}
	// After no_new_privs (dropRights), which Landlock needs of a process
	// without capabilities.
	landlock, err := restrictWrites(writableWithin(spec))
	if err != nil {
		return nil, err
	}
	if err := loadSandboxFilter(); err != nil {
		return nil, err
	}
	c := readConfinement(spec)
	c.Landlock = landlock
	return c, nil
}

// buildContainedRoot mounts the contained world under root: the host's system
// folders read-only, fresh /tmp, /dev and /proc, /sys with the cgroup tree
// covered, and the job's own paths.
func buildContainedRoot(spec SandboxSpec, root string) error {
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mounting the contained root: %w", err)
	}
	in := func(p string) string { return filepath.Join(root, p) }
	for _, p := range systemDirs {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 { // merged /usr: /bin -> usr/bin
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, in(p)); err != nil {
				return err
			}
			continue
		}
		if err := bindMount(p, in(p), true); err != nil {
			return err
		}
	}
	tmpOpts := "mode=1777"
	if spec.Limits.TmpBytes > 0 {
		tmpOpts += ",size=" + strconv.FormatInt(spec.Limits.TmpBytes, 10)
	}
	if err := mountFresh("tmpfs", in("/tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpOpts); err != nil {
		return err
	}
	if err := buildDev(in("/dev"), tmpOpts, spec.GPU); err != nil {
		return err
	}
	if err := mountFresh("proc", in("/proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := bindMount("/sys", in("/sys"), true); err != nil {
		return err
	}
	// The host's cgroup tree (every service's and every other sandbox's
	// group, by name) is covered by an empty, read-only folder. A program
	// that looks for its limits there (Go's GOMAXPROCS) finds none and uses
	// the machine's, as it does on a host without cgroups.
	if _, err := os.Stat(in("/sys/fs/cgroup")); err == nil {
		if err := unix.Mount("tmpfs", in("/sys/fs/cgroup"), "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0555,size=4k"); err != nil {
			return fmt.Errorf("covering the host's cgroup tree: %w", err)
		}
	}
	for _, b := range jobBinds(spec) {
		if err := bindMount(b.path, in(b.path), !b.writable); err != nil {
			return err
		}
	}
	return nil
}

// pivotIntoRoot makes root the process's "/", read-only, with the host's
// tree detached.
func pivotIntoRoot(root string) error {
	if err := os.Chdir(root); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root under the new one; detaching it
	// leaves no path back to the host's tree.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the contained root read-only: %w", err)
	}
	return nil
}

type jobBind struct {
	path     string
	writable bool
}

// jobBinds lists the job's own paths, parents before children, so a writable
// scratch folder inside a read-only tree is bound after (over) its parent.
func jobBinds(spec SandboxSpec) []jobBind {
	seen := map[string]bool{}
	var out []jobBind
	add := func(p string, w bool) {
		p = filepath.Clean(p)
		if p == "/" || p == "." || seen[p] {
			return
		}
		seen[p] = true
		out = append(out, jobBind{p, w})
	}
	if spec.Dir != "" {
		add(spec.Dir, true)
	}
	for _, p := range spec.Writable {
		add(p, true)
	}
	for _, p := range spec.ReadOnly {
		add(p, false)
	}
	sort.SliceStable(out, func(i, j int) bool { return depth(out[i].path) < depth(out[j].path) })
	return out
}

func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }

// mountFresh creates the mount point and mounts a new filesystem there.
func mountFresh(source, target, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", fstype, target, err)
	}
	return nil
}

// bindMount binds a host path (file or folder) at target, read-only (and
// recursively so: sub-mounts too) unless writable; never setuid, never devices.
func bindMount(src, target string, readOnly bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("contained world: %w", err)
	}
	if fi.IsDir() {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(-1, target, unix.AT_RECURSIVE, attr); err == nil {
		return nil
	}
	// Kernels before 5.12 have no mount_setattr: remount the top mount alone,
	// keeping the flags the source mount already has (some may be locked).
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if st.Flags&unix.ST_NOEXEC != 0 {
		flags |= unix.MS_NOEXEC
	}
	if readOnly || st.Flags&unix.ST_RDONLY != 0 {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		return fmt.Errorf("remounting %s: %w", src, err)
	}
	return nil
}

// gpuDevices are the host's GPU device nodes (and folders of them), bound
// only into the sandbox of a runtime whose offload pin puts layers on a card.
func gpuDevices() []string {
	var out []string
	for _, pattern := range []string{"/dev/nvidia*", "/dev/dri"} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			out = append(out, strings.TrimPrefix(p, "/dev/"))
		}
	}
	return out
}

// buildDev gives the contained process a /dev of its own: the harmless
// character devices, the host's GPU devices when gpu is set, and a private
// /dev/shm. A grader's tests and a runtime on the CPU never see a card.
func buildDev(dev, shmOpts string, gpu bool) error {
	if err := mountFresh("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	nodes := append([]string(nil), devNodes...)
	if gpu {
		nodes = append(nodes, gpuDevices()...)
	}
	for _, n := range nodes {
		src := filepath.Join("/dev", n)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := bindMount(src, filepath.Join(dev, n), false); err != nil {
			return err
		}
		// Devices need MS_NODEV cleared; the bind's nodev would make them
		// unusable, so the remount keeps only nosuid.
		if err := unix.MountSetattr(-1, filepath.Join(dev, n), 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_NODEV}); err != nil {
			_ = unix.Mount("", filepath.Join(dev, n), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID, "")
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return mountFresh("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, shmOpts)
}

// setRlimits applies the per-process caps. Without a pids cgroup the process
// cap falls back to RLIMIT_NPROC, which counts every process of the sandbox
// user: coarser, but a fork bomb still stops. Without a memory cgroup a memory
// cap falls back to RLIMIT_AS, per process.
func setRlimits(l Limits, nprocFallback, addressSpaceFallback bool) error {
	set := func(name string, res int, v uint64) error {
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("setting %s to %d: %w", name, v, err)
		}
		return nil
	}
	if err := set("RLIMIT_CORE", unix.RLIMIT_CORE, 0); err != nil {
		return err
	}
	if l.CPUSeconds > 0 {
		// The hard limit a second later: at the soft one the kernel sends
		// SIGXCPU, which names the cause in the exit status; equal limits
		// would make it a bare SIGKILL.
		v := uint64(l.CPUSeconds)
		if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: v, Max: v + 1}); err != nil {
			return fmt.Errorf("setting RLIMIT_CPU to %d: %w", v, err)
		}
	}
	if l.OpenFiles > 0 {
		if err := set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(l.OpenFiles)); err != nil {
			return err
		}
	}
	if l.FileBytes > 0 {
		if err := set("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(l.FileBytes)); err != nil {
			return err
		}
	}
	if l.MemoryBytes > 0 && addressSpaceFallback {
		if err := set("RLIMIT_AS", unix.RLIMIT_AS, uint64(l.MemoryBytes)); err != nil {
			return err
		}
	}
	if l.Processes > 0 && nprocFallback {
		if err := set("RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(l.Processes)); err != nil {
			return err
		}
	}
	return nil
}

// dropRights makes the process unprivileged for good. As root it becomes the
// sandbox user (all capabilities go with uid 0). In a user namespace (rig not
// root) only rig's own uid is mapped, so it stays that uid and drops every
// capability instead, with the securebits locked so execve cannot give them
// back. no_new_privs then stops setuid files and file capabilities.
func dropRights(spec SandboxSpec) error {
	if !spec.UserNS {
		if err := syscall.Setgroups([]int{spec.SandboxGID}); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setresgid(spec.SandboxGID, spec.SandboxGID, spec.SandboxGID); err != nil {
			return fmt.Errorf("setresgid %d: %w", spec.SandboxGID, err)
		}
		if err := syscall.Setresuid(spec.SandboxUID, spec.SandboxUID, spec.SandboxUID); err != nil {
			return fmt.Errorf("setresuid %d: %w", spec.SandboxUID, err)
		}
	} else {
		// NOROOT and NO_SETUID_FIXUP set, KEEP_CAPS clear, all three locked.
		const secure = 0x2f
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, secure, 0, 0, 0); err != nil {
			return fmt.Errorf("locking securebits: %w", err)
		}
		for c := 0; c <= unix.CAP_LAST_CAP; c++ {
			_ = unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return fmt.Errorf("dropping capabilities: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// readConfinement reads the process's own state after confine.
func readConfinement(spec SandboxSpec) *Confinement {
	c := &Confinement{UID: os.Getuid(), GID: os.Getgid(), ReadOnly: spec.ReadOnly, Limits: spec.Limits}
	name := spec.SandboxUser
	if spec.UserNS {
		name = "rig's own user in a user namespace, no capabilities"
	}
	c.User = fmt.Sprintf("%s (uid %d, gid %d)", name, c.UID, c.GID)
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err == nil {
		c.NoNewPrivs = v == 1
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				c.Capabilities = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
				c.Seccomp = map[string]string{"0": "none", "1": "strict", "2": "filter"}[strings.TrimSpace(v)]
			}
		}
	}
	c.PIDNamespace, _ = os.Readlink("/proc/self/ns/pid")
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				c.VisibleProcesses++
			}
		}
	}
	c.Writable = writableMounts("/proc/self/mountinfo")
	if ents, err := os.ReadDir("/dev"); err == nil {
		for _, e := range ents {
			// The entry is the mount point; what is bound over it shows
			// only through stat.
			if fi, err := os.Stat(filepath.Join("/dev", e.Name())); err == nil && (fi.Mode()&os.ModeDevice != 0 || (fi.IsDir() && e.Name() != "shm")) {
				c.Devices = append(c.Devices, e.Name())
			}
		}
	}
	for res, field := range map[int]*int{unix.RLIMIT_CPU: &c.Limits.CPUSeconds, unix.RLIMIT_NOFILE: &c.Limits.OpenFiles} {
		var r unix.Rlimit
		if unix.Getrlimit(res, &r) == nil && r.Cur != unix.RLIM_INFINITY {
			*field = int(r.Cur)
		}
	}
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_FSIZE, &r) == nil && r.Cur != unix.RLIM_INFINITY {
		c.Limits.FileBytes = int64(r.Cur)
	}
	return c
}

// writableMounts lists the mount points whose own options say rw.
func writableMounts(mountinfo string) []string {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		for _, o := range strings.Split(fields[5], ",") {
			if o == "rw" {
				out = append(out, fields[4])
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Summary is the confinement in one line, for validation and smoke output.
func (c *Confinement) Summary() string {
	if c == nil {
		return "not confined"
	}
	var w []string
	for _, p := range c.Writable {
		if strings.HasPrefix(p, "/dev/") && p != "/dev/shm" {
			continue // the device nodes are bound writable, as devices are
		}
		w = append(w, p)
	}
	caps := "none"
	if strings.Trim(c.Capabilities, "0") != "" {
		caps = c.Capabilities
	}
	l := c.Limits
	cpu := "-"
	if l.CPUSeconds > 0 {
		cpu = fmt.Sprintf("%ds", l.CPUSeconds)
	}
	landlock := "none (not on this kernel)"
	if c.Landlock != "" {
		landlock = c.Landlock
	}
	return fmt.Sprintf("as %s, no_new_privs=%v, capabilities %s, seccomp %s, landlock %s, sees %d processes, writable %s, devices %s; limits: processes %d, memory %s, cpu %s, open files %d, file %s, scratch %s, tmp %s",
		c.User, c.NoNewPrivs, caps, c.Seccomp, landlock, c.VisibleProcesses, strings.Join(w, " "), strings.Join(c.Devices, " "), l.Processes, sizeOrNone(l.MemoryBytes), cpu, l.OpenFiles, sizeOrNone(l.FileBytes), sizeOrNone(l.ScratchBytes), sizeOrNone(l.TmpBytes))
}

func sizeOrNone(n int64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%dMiB", n>>20)
}

// Problems lists what makes the confinement less than rig promises: used by
// the validation run, which fails on any.
func (c *Confinement) Problems() []string {
	if c == nil {
		return []string{"no confinement was read back from inside the contained process"}
	}
	var p []string
	if c.UID == 0 && !strings.Contains(c.User, "user namespace") {
		p = append(p, "the contained process runs as root")
	}
	if !c.NoNewPrivs {
		p = append(p, "no_new_privs is not set")
	}
	if strings.Trim(c.Capabilities, "0") != "" {
		p = append(p, "the contained process holds capabilities "+c.Capabilities)
	}
	if c.Seccomp != "filter" {
		p = append(p, "no seccomp filter is loaded (seccomp "+c.Seccomp+")")
	}
	for _, w := range c.Writable {
		if w == "/" {
			p = append(p, "the contained root is writable")
		}
	}
	return p
}
