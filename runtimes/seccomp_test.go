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
