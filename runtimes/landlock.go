package runtimes

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is the sandbox's second wall for writes. The first is the mount
// layout (confine): the host's folders are bound read-only and only the job's
// scratch is writable. Where the kernel has Landlock (Linux 5.13+), the exec
// stage also restricts itself, and so the runtime and everything it starts,
// to writing, creating, removing and renaming only beneath the folders it is
// meant to write: a mount left writable by mistake, or a kernel bug in one
// filesystem's read-only handling, then still gives no write. Reading is
// left to the mount layout (what is not mounted is not there to read).
//
// Writes that need no path stay open: pipes, sockets, the descriptors the
// process was handed. The log init opened as its stdout and stderr lies
// outside the contained tree, yet programs write it by name
// (/dev/stderr is /proc/self/fd/2), so a rule is made on that file itself.

// landlockWrites are the rights the ruleset handles, by ABI version: every
// way to change the filesystem. Executing and reading are not handled.
func landlockWrites(abi int) uint64 {
	w := uint64(unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		w |= unix.LANDLOCK_ACCESS_FS_REFER // links and renames across folders
	}
	if abi >= 3 {
		w |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	return w
}

// fileWrites are the rights a rule on a single file (not a folder) may give.
func fileWrites(abi int) uint64 {
	return landlockWrites(abi) & (unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE)
}

// landlockABI is the kernel's Landlock version, or 0 where it has none
// (not built in, or not enabled at boot).
func landlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// restrictWrites confines the calling thread (the exec stage's, which then
// calls execve) to writing beneath writable folders and to the files open
// as its stdout and stderr, the device nodes and its own /proc. It returns
// what it did in one line for the confinement block: "" where the kernel
// has no Landlock, which is not an error (the mounts are the wall).
func restrictWrites(writable []string) (string, error) {
	abi := landlockABI()
	if abi == 0 {
		return "", nil
	}
	handled := landlockWrites(abi)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	// Only the first field is filled: 8 bytes is the size every ABI takes.
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), 8, 0)
	if e != 0 {
		return "", fmt.Errorf("landlock: creating the ruleset: %w", e)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	addFD := func(name string, target int, access uint64) error {
		rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(target)}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
			return fmt.Errorf("landlock: a rule for %s: %w", name, e)
		}
		return nil
	}
	add := func(path string, access uint64) error {
		target, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("landlock: %s: %w", path, err)
		}
		defer unix.Close(target)
		return addFD(path, target, access)
	}
	var allowed []string
	for _, p := range writable {
		if p == "" {
			continue
		}
		if err := add(p, handled); err != nil {
			return "", err
		}
		allowed = append(allowed, p)
	}
	// Device nodes (/dev/null above all) and the process's own /proc files
	// are written, never made or removed.
	for _, p := range []string{"/dev", "/proc"} {
		if err := add(p, fileWrites(abi)); err != nil {
			return "", err
		}
	}
	// The log: opened by init outside the contained tree, written by name
	// through /proc/self/fd. The rule is made on the descriptor itself (this
	// stage, having changed its uid, may no longer read its own
	// /proc/self/fd). A pipe or a socket needs no rule (and takes none).
	for _, fd := range []int{1, 2} {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if err := addFD(fmt.Sprintf("descriptor %d", fd), fd, fileWrites(abi)); err != nil {
			return "", err
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); e != 0 {
		if errors.Is(e, unix.EPERM) {
			return "", fmt.Errorf("landlock: restricting the process: %w (no_new_privs must be set first)", e)
		}
		return "", fmt.Errorf("landlock: restricting the process: %w", e)
	}
	return fmt.Sprintf("abi %d: writes only beneath %s, and to device nodes, its /proc and its log", abi, strings.Join(allowed, " ")), nil
}

// writableWithin lists the folders a contained process is meant to write,
// as they appear inside: its working folder, its other writable folders and
// its private /tmp and /dev/shm.
func writableWithin(spec SandboxSpec) []string {
	out := []string{"/tmp", "/dev/shm"}
	for _, b := range jobBinds(spec) {
		if b.writable {
			if _, err := os.Stat(b.path); err == nil {
				out = append(out, b.path)
			}
		}
	}
	return out
}
