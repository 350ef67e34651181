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
	// a second round of attacks (issue 43): the LDT (old segment tricks),
	// file handles (open_by_handle_at's other half, which names inodes of
	// the host's filesystems)
	"modify_ldt", "name_to_handle_at",
}

// allowedSocketFamilies are the only address families a contained process
// may open: unix sockets (Python, git), IPv4 and IPv6 on loopback (its
// server's port, Aider to its proxy), and netlink, which libc and the route
// check read interfaces through. Every other family is refused, whatever
// namespace it would ignore: AF_VSOCK reaches a virtual machine's host side
// past the network namespace, AF_ALG is kernel crypto attack surface.
var allowedSocketFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// allowedPersonalities are the personality(2) values a program may set or
// query: Linux itself, with address randomisation off (a debugger's, or
// setarch -R), with 32-bit addresses, and the query 0xffffffff. The others
// (READ_IMPLIES_EXEC, the emulations of other systems) loosen the memory
// protections exploits rely on losing.
var allowedPersonalities = []uint64{perLinux, addrNoRandomize, addrLimit32bit, addrNoRandomize | addrLimit32bit, personalityQuery}

// personality(2)'s values, from linux/personality.h (x/sys/unix has none).
const (
	perLinux         = 0x0
	addrNoRandomize  = 0x0040000
	addrLimit32bit   = 0x0800000
	readImpliesExec  = 0x0400000
	personalityQuery = 0xffffffff
)

// deniedIoctls are the terminal requests no contained process may make on
// any descriptor: TIOCSTI pushes bytes into a terminal's input as if typed
// (a contained test typed a command into the root shell that started rig),
// TIOCLINUX does the same through the console's selection, TIOCCONS
// redirects the console's output, and TIOCSETD swaps the line discipline,
// the way into the tty layer's own bugs. A contained process has no
// terminal (the sandbox starts in a session of its own and /dev has no tty);
// this is the wall behind that one, for a terminal descriptor that reaches
// it some other way.
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX, unix.TIOCCONS, unix.TIOCSETD}

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
			{Action: errno(unix.EAFNOSUPPORT), NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "socket", Conditions: noneOf(0, allowedSocketFamilies)},
				{Name: "socketpair", Conditions: noneOf(0, allowedSocketFamilies)},
			}},
			{Action: errno(unix.EPERM), NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "personality", Conditions: noneOf(0, allowedPersonalities)},
			}},
		},
	}
}

// noneOf matches a call whose argument arg is none of values. The library
// compares all 64 bits, so a value with high bits set is never one of them
// and is refused too; the kernel would read only the low 32.
func noneOf(arg uint32, values []uint64) seccomp.ArgumentConditions {
	var c seccomp.ArgumentConditions
	for _, v := range values {
		c = append(c, seccomp.Condition{Argument: arg, Operation: seccomp.NotEqual, Value: v})
	}
	return c
}

// ioctlGuard refuses deniedIoctls with EPERM. It is written here rather than
// as a library condition because ioctl's request is an unsigned int: the
// kernel drops the high 32 bits of the register, while the library's Equal
// compares all 64, so TIOCSTI|1<<32 would pass an Equal check and still be
// TIOCSTI to the kernel. The guard compares the low word alone.
func ioctlGuard(ioctlNr uint32) []bpf.Instruction {
	const (
		nrOffset   = 0  // seccomp_data.nr
		arg1Offset = 24 // seccomp_data.args[1], its low word on a little-endian machine
	)
	eperm := uint32(seccomp.ActionErrno) | uint32(unix.EPERM)
	g := []bpf.Instruction{
		bpf.LoadAbsolute{Off: nrOffset, Size: 4},
		// Not ioctl: skip the load, the request checks, the jump and the
		// return below them.
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ioctlNr, SkipTrue: uint8(len(deniedIoctls) + 3)},
		bpf.LoadAbsolute{Off: arg1Offset, Size: 4},
	}
	for i, req := range deniedIoctls {
		// A match jumps to the return of EPERM after the remaining checks.
		g = append(g, bpf.JumpIf{Cond: bpf.JumpEqual, Val: req, SkipTrue: uint8(len(deniedIoctls) - i)})
	}
	g = append(g,
		bpf.Jump{Skip: 1},
		bpf.RetConstant{Val: eperm},
		// Every path reaches here with the accumulator changed; the
		// library's program loads what it needs itself.
	)
	return g
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
	ioctlNr, ok := native.SyscallNames["ioctl"]
	if !ok {
		return nil, fmt.Errorf("seccomp filter: no ioctl on %s", native.Name)
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	// The ioctl guard loads the call's number without checking the x32 bit:
	// an x32 ioctl (nr | 0x40000000) is not equal and goes on to the
	// library's program, which answers every x32 call ENOSYS.
	guard = append(guard, ioctlGuard(uint32(ioctlNr))...)
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
