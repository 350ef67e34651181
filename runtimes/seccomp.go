package runtimes

import (
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The sandbox's seccomp filter is a deny list: the runtimes (llama-server,
// Ollama, Aider's Python, git, a task's tests) need most of the kernel, and
// what the containment keeps out is absent rather than filtered. The filter
// takes away the calls that would let a contained process undo or get around
// that containment (a user namespace in which it is root again, new mounts,
// entering another namespace) and the kernel interfaces most often used to
// attack the kernel itself (bpf, io_uring, keyrings, perf events, ptrace,
// userfaultfd). A denied call returns EPERM, so a program that probes for a
// feature degrades instead of dying; clone3 returns ENOSYS, whose arguments
// sit in memory a filter cannot read, so libc falls back to clone, whose
// flags it can.

// namespaceFlags are clone's flags that make a new namespace.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// deniedCalls return EPERM inside every sandbox.
var deniedCalls = []string{
	// namespaces and mounts: the containment's own tools
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
	"move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// reaching into other processes
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	// kernel attack surface a runtime does not use
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"keyctl", "add_key", "request_key",
	// the machine's own administration
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "open_by_handle_at",
	"lookup_dcookie", "uselib",
}

// sandboxPolicy is the filter as the library assembles it.
func sandboxPolicy() seccomp.Policy {
	errno := func(e unix.Errno) seccomp.Action { return seccomp.ActionErrno | seccomp.Action(e) }
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: errno(unix.ENOSYS), Names: []string{"clone3"}},
			{Action: errno(unix.EPERM), NamesWithCondtions: []seccomp.NameWithConditions{{
				Name:       "clone",
				Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}},
			}}},
			{Action: errno(unix.EPERM), Names: deniedCalls},
		},
	}
}

// sandboxFilter is the BPF program loaded in every sandbox. The library sends
// a call made through another architecture's entry (int 0x80, the i386 ABI
// on x86-64) to the policy's default action, which here is allow: that would
// reach unshare by its i386 number. The guard in front ends such a process
// instead; nothing rig runs is built for another architecture.
func sandboxFilter() ([]bpf.RawInstruction, error) {
	policy := sandboxPolicy()
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("assembling the seccomp filter: %w", err)
	}
	native, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	const archOffset = 4 // seccomp_data.arch
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	return bpf.Assemble(append(guard, insts...))
}

// loadSandboxFilter installs the filter on every thread of the calling
// process; it holds across execve for the program and all it starts. The
// caller has set no_new_privs (dropRights), which an unprivileged process
// needs before it may load a filter.
func loadSandboxFilter() error {
	raw, err := sandboxFilter()
	if err != nil {
		return err
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		prog[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("loading the seccomp filter: %w", e)
	}
	return nil
}
