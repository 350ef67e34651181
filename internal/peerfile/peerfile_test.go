package peerfile

import (
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Accounts by number: the kernel needs no name for a uid, so the tests need
// no real accounts, only root to make files others own.
const (
	someone  = 54321
	theGroup = 54400
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes files owned by other uids")
	}
}

// openDir is a folder every account may enter (t.TempDir's parent is
// closed to them).
func openDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "peerfile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func write(t *testing.T, path, body string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

func TestOpenJudgesAsTheCaller(t *testing.T) {
	needRoot(t)
	top := openDir(t)
	pub := filepath.Join(top, "pub")
	mkdir(t, pub, 0o755, 0, 0)
	private := filepath.Join(top, "private")
	mkdir(t, private, 0o700, 0, 0)
	mine := filepath.Join(top, "mine")
	mkdir(t, mine, 0o755, someone, someone)
	write(t, filepath.Join(pub, "secret"), "root only", 0o600, 0, 0)
	write(t, filepath.Join(pub, "open"), "anyone", 0o644, 0, 0)
	write(t, filepath.Join(pub, "group"), "the group", 0o640, 0, theGroup)
	write(t, filepath.Join(pub, "owned"), "the owner", 0o400, someone, 0)
	write(t, filepath.Join(private, "open"), "behind a closed folder", 0o644, 0, 0)
	if err := unix.Mkfifo(filepath.Join(pub, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	link := func(name, target string) string {
		p := filepath.Join(mine, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, someone, someone); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sub := filepath.Join(mine, "sub")
	mkdir(t, sub, 0o755, someone, someone)

	caller := Cred{UID: someone, GIDs: []int{someone}}
	inGroup := Cred{UID: someone, GIDs: []int{someone, theGroup}}
	for _, c := range []struct {
		what string
		path string
		who  Cred
		want string // the content, or "" for a refusal
	}{
		{"a world-readable file", filepath.Join(pub, "open"), caller, "anyone"},
		{"a root-only file", filepath.Join(pub, "secret"), caller, ""},
		{"root reads a root-only file", filepath.Join(pub, "secret"), Cred{UID: 0}, "root only"},
		{"a group file, outside the group", filepath.Join(pub, "group"), caller, ""},
		{"a group file, in the group", filepath.Join(pub, "group"), inGroup, "the group"},
		{"the owner's own file, mode 0400", filepath.Join(pub, "owned"), caller, "the owner"},
		{"a readable file behind a folder the caller may not enter", filepath.Join(private, "open"), caller, ""},
		{"a missing file behind that folder", filepath.Join(private, "nothing"), caller, ""},
		{"a link the caller made to a root-only file", link("to-secret", filepath.Join(pub, "secret")), caller, ""},
		{"a relative link to a root-only file", link("rel-secret", "../pub/secret"), caller, ""},
		{"a link to a readable file", link("to-open", filepath.Join(pub, "open")), caller, "anyone"},
		{"a link into the closed folder", link("to-private", filepath.Join(private, "open")), caller, ""},
		{"dot-dot after a link resolves from the link's target", link("to-pub", pub) + "/../pub/open", caller, "anyone"},
		{"dot-dot after a link to a folder, back to the closed one", link("to-sub", sub) + "/../../private/open", caller, ""},
		{"a link loop", link("loop", filepath.Join(mine, "loop")), caller, ""},
		{"a fifo", filepath.Join(pub, "fifo"), caller, ""},
		{"a folder", pub, caller, ""},
	} {
		f, err := Open(c.path, c.who)
		if c.want == "" {
			if err == nil {
				f.Close()
				t.Errorf("%s: opened %s", c.what, c.path)
			} else if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("%s: %v, want ErrDenied naming %s", c.what, err, c.path)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.what, err)
			continue
		}
		b := make([]byte, 64)
		n, _ := f.Read(b)
		f.Close()
		if string(b[:n]) != c.want {
			t.Errorf("%s: read %q, want %q", c.what, b[:n], c.want)
		}
	}
	if _, err := ReadFile(filepath.Join(pub, "open"), caller, 3); err == nil || !strings.Contains(err.Error(), "over 3 bytes") {
		t.Errorf("a file over the limit: %v", err)
	}
}

// setACL writes a POSIX access ACL as setfacl would (system.posix_acl_access,
// version 2): owner, a named user, group, mask, others.
func setACL(t *testing.T, path string, owner, named, group, mask, other uint16, namedUID uint32) {
	t.Helper()
	buf := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{aclUserObj, owner, ^uint32(0)}, {aclUser, named, namedUID}, {aclGroupObj, group, ^uint32(0)}, {aclMask, mask, ^uint32(0)}, {aclOther, other, ^uint32(0)}} {
		buf = binary.LittleEndian.AppendUint16(buf, e.tag)
		buf = binary.LittleEndian.AppendUint16(buf, e.perm)
		buf = binary.LittleEndian.AppendUint32(buf, e.id)
	}
	if err := unix.Setxattr(path, "system.posix_acl_access", buf, 0); err != nil {
		if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
			t.Skipf("%s: the filesystem keeps no ACLs: %v", path, err)
		}
		t.Fatal(err)
	}
}

// TestOpenHonoursACLs: an ACL that refuses a named user what others may
// read, and one that grants a named user what the mode keeps to root.
func TestOpenHonoursACLs(t *testing.T) {
	needRoot(t)
	dir := openDir(t)
	refused := filepath.Join(dir, "refused")
	write(t, refused, "not for someone", 0o644, 0, 0)
	setACL(t, refused, 6, 0, 4, 4, 4, someone)
	granted := filepath.Join(dir, "granted")
	write(t, granted, "for someone", 0o600, 0, 0)
	setACL(t, granted, 6, 4, 0, 4, 0, someone)
	caller := Cred{UID: someone, GIDs: []int{someone}}
	if err := Check(refused, caller); !errors.Is(err, ErrDenied) {
		t.Errorf("a named user the ACL refuses: %v, want ErrDenied", err)
	}
	if err := Check(refused, Cred{UID: someone + 1}); err != nil {
		t.Errorf("another user, under the ACL's others entry: %v", err)
	}
	if err := Check(granted, caller); err != nil {
		t.Errorf("a named user the ACL grants: %v", err)
	}
	if err := Check(granted, Cred{UID: someone + 1}); !errors.Is(err, ErrDenied) {
		t.Errorf("another user on a file the ACL grants only to someone: %v, want ErrDenied", err)
	}
}

// TestOpenWinsTheRaceAgainstASwappedLink: the caller swaps a link between a
// file they may read and a root-only one as fast as they can while the
// daemon opens it; the root-only file's content never comes back.
func TestOpenWinsTheRaceAgainstASwappedLink(t *testing.T) {
	needRoot(t)
	top := openDir(t)
	write(t, filepath.Join(top, "open"), "anyone", 0o644, 0, 0)
	write(t, filepath.Join(top, "secret"), "root only", 0o600, 0, 0)
	mine := filepath.Join(top, "mine")
	mkdir(t, mine, 0o755, someone, someone)
	link := filepath.Join(mine, "design.json")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			target := filepath.Join(top, "open")
			if i%2 == 1 {
				target = filepath.Join(top, "secret")
			}
			tmp := link + ".new"
			os.Remove(tmp)
			if err := os.Symlink(target, tmp); err == nil {
				os.Rename(tmp, link)
			}
		}
	}()
	caller := Cred{UID: someone, GIDs: []int{someone}}
	opened := 0
	for range 3000 {
		b, err := ReadFile(link, caller, 64)
		if err == nil {
			opened++
			if string(b) != "anyone" {
				close(stop)
				<-done
				t.Fatalf("read %q through a swapped link", b)
			}
		}
	}
	close(stop)
	<-done
	if opened == 0 {
		t.Fatal("the readable file was never opened: the race did not run")
	}
}

// TestOpenAnyIsOsOpenAsTheCaller: OpenAny opens a file as Open does and a
// folder for listing only when the caller may read it; a missing file is
// fs.ErrNotExist as well as ErrDenied where the caller could see it is
// missing, and only ErrDenied behind a folder they may not enter; the file
// returned is named as it was asked for, so a reader's errors name it.
func TestOpenAnyIsOsOpenAsTheCaller(t *testing.T) {
	needRoot(t)
	top := openDir(t)
	listable := filepath.Join(top, "listable")
	mkdir(t, listable, 0o755, 0, 0)
	write(t, filepath.Join(listable, "a"), "a", 0o644, 0, 0)
	searchOnly := filepath.Join(top, "search-only")
	mkdir(t, searchOnly, 0o711, 0, 0)
	write(t, filepath.Join(searchOnly, "b"), "b", 0o644, 0, 0)
	private := filepath.Join(top, "private")
	mkdir(t, private, 0o700, 0, 0)
	caller := Cred{UID: someone, GIDs: []int{someone}}

	d, err := OpenAny(listable, caller)
	if err != nil {
		t.Fatalf("a folder the caller may list: %v", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil || len(names) != 1 || names[0] != "a" {
		t.Errorf("listing %s: %v %v, want [a]", listable, names, err)
	}
	if _, err := Open(listable, caller); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("Open of a folder: %v, want refused as a folder", err)
	}
	if _, err := OpenAny(searchOnly, caller); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "may not list") {
		t.Errorf("a folder the caller may enter but not list: %v, want refused", err)
	}
	f, err := OpenAny(filepath.Join(searchOnly, "b"), caller)
	if err != nil {
		t.Fatalf("a readable file in that folder: %v", err)
	}
	if f.Name() != filepath.Join(searchOnly, "b") {
		t.Errorf("the file is named %q, want the path asked for", f.Name())
	}
	f.Close()

	_, err = OpenAny(filepath.Join(listable, "missing"), caller)
	if !errors.Is(err, ErrDenied) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file in a folder the caller may search: %v, want ErrDenied and fs.ErrNotExist", err)
	}
	_, err = OpenAny(filepath.Join(private, "missing"), caller)
	if !errors.Is(err, ErrDenied) || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file behind a folder the caller may not enter: %v, want ErrDenied and not fs.ErrNotExist", err)
	}
}

// TestTheDescriptorOutlivesTheLink: once Open has judged a file, reads go
// to it whatever the link it was reached through points at afterwards;
// reading the path again (what a check-then-read by path does) would not.
func TestTheDescriptorOutlivesTheLink(t *testing.T) {
	needRoot(t)
	top := openDir(t)
	write(t, filepath.Join(top, "open"), "anyone", 0o644, 0, 0)
	write(t, filepath.Join(top, "secret"), "root only", 0o600, 0, 0)
	mine := filepath.Join(top, "mine")
	mkdir(t, mine, 0o755, someone, someone)
	link := filepath.Join(mine, "bank.jsonl")
	if err := os.Symlink(filepath.Join(top, "open"), link); err != nil {
		t.Fatal(err)
	}
	f, err := Open(link, Cred{UID: someone, GIDs: []int{someone}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.Remove(link)
	if err := os.Symlink(filepath.Join(top, "secret"), link); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(f); string(b) != "anyone" {
		t.Errorf("read %q through the judged descriptor, want the file judged", b)
	}
	if b, _ := os.ReadFile(link); string(b) != "root only" {
		t.Errorf("the path now reads %q; the test means to show it reaches root's file", b)
	}
}
