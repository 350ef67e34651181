package runtimes

import (
	endian "encoding/binary"
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData lays out struct seccomp_data as the kernel hands it to the
// filter. The BPF interpreter loads words big-endian, so each 32-bit word is
// written that way at the offset where the (little-endian) kernel keeps it.
func seccompData(nr uint32, archID arch.AuditArch, args ...uint64) []byte {
	b := make([]byte, 64)
	endian.BigEndian.PutUint32(b[0:], nr)
	endian.BigEndian.PutUint32(b[4:], uint32(archID))
	for i, a := range args {
		endian.BigEndian.PutUint32(b[16+8*i:], uint32(a))       // low word first in memory
		endian.BigEndian.PutUint32(b[16+8*i+4:], uint32(a>>32)) // then the high word
	}
	return b
}

// TestSandboxFilterDecisions runs the filter rig loads in every sandbox
// through a BPF interpreter, call by call.
func TestSandboxFilterDecisions(t *testing.T) {
	raw, err := sandboxFilter()
	if err != nil {
		t.Fatal(err)
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	native, err := arch.GetInfo("")
	if err != nil {
		t.Skip(err)
	}
	nr := func(name string) uint32 {
		n, ok := native.SyscallNames[name]
		if !ok {
			t.Fatalf("no syscall %s on %s", name, native.Name)
		}
		return uint32(n)
	}
	eperm := uint32(seccomp.ActionErrno) | uint32(unix.EPERM)
	enosys := uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)
	eafnosupport := uint32(seccomp.ActionErrno) | uint32(unix.EAFNOSUPPORT)
	allow, kill := uint32(seccomp.ActionAllow), uint32(seccomp.ActionKillProcess)
	threadFlags := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM)
	cases := []struct {
		name string
		data []byte
		want uint32
	}{
		{"read", seccompData(nr("read"), native.ID), allow},
		{"execve", seccompData(nr("execve"), native.ID), allow},
		{"clone of a thread (Go, glibc)", seccompData(nr("clone"), native.ID, threadFlags), allow},
		{"clone as fork", seccompData(nr("clone"), native.ID, uint64(unix.SIGCHLD)), allow},
		{"clone(CLONE_NEWUSER)", seccompData(nr("clone"), native.ID, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), eperm},
		{"clone(CLONE_NEWNET)", seccompData(nr("clone"), native.ID, unix.CLONE_NEWNET), eperm},
		{"clone(CLONE_NEWNS)", seccompData(nr("clone"), native.ID, unix.CLONE_NEWNS), eperm},
		{"clone3", seccompData(nr("clone3"), native.ID), enosys},
		{"unshare(0)", seccompData(nr("unshare"), native.ID, 0), eperm},
		{"setns", seccompData(nr("setns"), native.ID), eperm},
		{"mount", seccompData(nr("mount"), native.ID), eperm},
		{"fsopen", seccompData(nr("fsopen"), native.ID), eperm},
		{"bpf", seccompData(nr("bpf"), native.ID), eperm},
		{"io_uring_setup", seccompData(nr("io_uring_setup"), native.ID), eperm},
		{"keyctl", seccompData(nr("keyctl"), native.ID), eperm},
		{"perf_event_open", seccompData(nr("perf_event_open"), native.ID), eperm},
		{"ptrace", seccompData(nr("ptrace"), native.ID), eperm},
		{"another architecture's entry (i386 unshare)", seccompData(310, 0x40000003), kill},
		// The terminal's input and console requests, also with high bits
		// set, which the kernel drops from ioctl's request.
		{"ioctl(TIOCSTI)", seccompData(nr("ioctl"), native.ID, 0, unix.TIOCSTI), eperm},
		{"ioctl(TIOCSTI | 1<<32)", seccompData(nr("ioctl"), native.ID, 0, unix.TIOCSTI|1<<32), eperm},
		{"ioctl(TIOCLINUX)", seccompData(nr("ioctl"), native.ID, 0, unix.TIOCLINUX), eperm},
		{"ioctl(TIOCCONS)", seccompData(nr("ioctl"), native.ID, 0, unix.TIOCCONS), eperm},
		{"ioctl(TIOCSETD)", seccompData(nr("ioctl"), native.ID, 0, unix.TIOCSETD), eperm},
		{"ioctl(TCGETS), as isatty does", seccompData(nr("ioctl"), native.ID, 1, unix.TCGETS), allow},
		{"ioctl(FIONREAD)", seccompData(nr("ioctl"), native.ID, 3, unix.TIOCINQ), allow},
		{"read with TIOCSTI's value as its count", seccompData(nr("read"), native.ID, 0, unix.TIOCSTI), allow},
		// Socket families: an allow-list.
		{"socket(AF_UNIX)", seccompData(nr("socket"), native.ID, unix.AF_UNIX), allow},
		{"socket(AF_INET)", seccompData(nr("socket"), native.ID, unix.AF_INET), allow},
		{"socket(AF_INET6)", seccompData(nr("socket"), native.ID, unix.AF_INET6), allow},
		{"socket(AF_NETLINK)", seccompData(nr("socket"), native.ID, unix.AF_NETLINK), allow},
		{"socket(AF_VSOCK)", seccompData(nr("socket"), native.ID, unix.AF_VSOCK), eafnosupport},
		{"socket(AF_ALG)", seccompData(nr("socket"), native.ID, unix.AF_ALG), eafnosupport},
		{"socket(AF_PACKET)", seccompData(nr("socket"), native.ID, unix.AF_PACKET), eafnosupport},
		{"socket(AF_INET | 1<<32)", seccompData(nr("socket"), native.ID, unix.AF_INET|1<<32), eafnosupport},
		{"socketpair(AF_UNIX)", seccompData(nr("socketpair"), native.ID, unix.AF_UNIX), allow},
		{"socketpair(AF_VSOCK)", seccompData(nr("socketpair"), native.ID, unix.AF_VSOCK), eafnosupport},
		// personality: Linux's own values and the query only.
		{"personality query", seccompData(nr("personality"), native.ID, 0xffffffff), allow},
		{"personality(PER_LINUX)", seccompData(nr("personality"), native.ID, 0), allow},
		{"personality(ADDR_NO_RANDOMIZE)", seccompData(nr("personality"), native.ID, addrNoRandomize), allow},
		{"personality(READ_IMPLIES_EXEC)", seccompData(nr("personality"), native.ID, readImpliesExec), eperm},
		{"modify_ldt", seccompData(nr("modify_ldt"), native.ID), eperm},
		{"name_to_handle_at", seccompData(nr("name_to_handle_at"), native.ID), eperm},
	}
	if native.ID == arch.X86_64.ID {
		cases = append(cases, struct {
			name string
			data []byte
			want uint32
		}{"the x32 ABI's unshare", seccompData(nr("unshare")|0x40000000, native.ID), enosys})
	}
	for _, c := range cases {
		got, err := vm.Run(c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if uint32(got) != c.want {
			t.Errorf("%s: the filter returns %#x, want %#x", c.name, got, c.want)
		}
	}
}
