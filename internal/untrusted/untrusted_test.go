package untrusted

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// outside is a folder beside the walked tree holding a file the tree's links
// point at; nothing of it may show up in what a walk reads.
func outside(t *testing.T) (dir, secret string) {
	dir = t.TempDir()
	secret = "outside-the-tree-7c2e"
	write(t, filepath.Join(dir, "secret"), secret)
	write(t, filepath.Join(dir, "sub", "deep"), secret)
	return dir, secret
}

func TestSnapshotListsLinksAndNeverFollowsThem(t *testing.T) {
	out, _ := outside(t)
	root := t.TempDir()
	write(t, filepath.Join(root, "a.txt"), "a")
	os.Symlink(filepath.Join(out, "secret"), filepath.Join(root, "to-file"))
	os.Symlink(filepath.Join(out, "sub"), filepath.Join(root, "to-dir"))
	if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Snapshot(root, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m["to-file"].Kind != Symlink || m["to-file"].SHA256 != "" || m["to-file"].Target != filepath.Join(out, "secret") {
		t.Errorf("a link to a file was read as %+v", m["to-file"])
	}
	if m["to-dir"].Kind != Symlink {
		t.Errorf("a link to a folder was read as %+v", m["to-dir"])
	}
	if _, ok := m["to-dir/deep"]; ok {
		t.Error("the walk went through a link into a folder outside the tree")
	}
	if m["pipe"].Kind != Other {
		t.Errorf("a fifo was read as %+v", m["pipe"])
	}
	if m["a.txt"].Kind != File || m["a.txt"].SHA256 == "" {
		t.Errorf("a plain file was read as %+v", m["a.txt"])
	}
}

func TestWalkRefusesARootThatIsALink(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "repo")
	os.Symlink(real, link)
	if _, err := Snapshot(link, Limits{}, nil); err == nil {
		t.Error("a walk went through a root that is a link")
	}
}

func TestChangedListsNewAndAlteredEntriesOnly(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "same.py"), "x = 1\n")
	write(t, filepath.Join(root, "edit.py"), "x = 1\n")
	write(t, filepath.Join(root, "mode.sh"), "echo\n")
	write(t, filepath.Join(root, "gone.py"), "x\n")
	write(t, filepath.Join(root, "skipme", "inner"), "x\n")
	skip := func(rel string, e Entry) bool { return rel == "skipme" }
	before, err := Snapshot(root, Limits{}, skip)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "edit.py"), "x = 2\n") // same size
	os.Chmod(filepath.Join(root, "mode.sh"), 0o755)
	os.Remove(filepath.Join(root, "gone.py"))
	write(t, filepath.Join(root, "new", "file.py"), "y\n")
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	write(t, filepath.Join(root, "skipme", "inner"), "changed\n")
	after, err := Snapshot(root, Limits{}, skip)
	if err != nil {
		t.Fatal(err)
	}
	got := before.Changed(after)
	want := []string{"edit.py", "link", "mode.sh", "new/file.py"}
	if !slices.Equal(got, want) {
		t.Errorf("changed %v, want %v", got, want)
	}
}

func TestWalkStopsAtItsCaps(t *testing.T) {
	root := t.TempDir()
	for i := range 5 {
		write(t, filepath.Join(root, strings.Repeat("f", i+1)), strings.Repeat("x", 100))
	}
	for _, c := range []struct {
		name string
		lim  Limits
		want string
	}{
		{"entries", Limits{Entries: 3}, "more than 3 entries"},
		{"bytes", Limits{Bytes: 250}, "more than 250 bytes"},
	} {
		_, err := Snapshot(root, c.lim, nil)
		if !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), root) {
			t.Errorf("%s: err %v, want ErrTooBig naming %q and the tree", c.name, err, c.want)
		}
	}
	if _, err := Snapshot(root, Limits{Entries: 5, Bytes: 500}, nil); err != nil {
		t.Errorf("a tree exactly at its caps: %v", err)
	}
}

func TestWalkStopsAtItsDepth(t *testing.T) {
	root := t.TempDir()
	// MkdirAll would pass PATH_MAX; go down one level at a time.
	cur := root
	for range maxDepth + 2 {
		cur = filepath.Join(cur, "d")
		if err := os.Mkdir(cur, 0o755); err != nil {
			t.Skipf("cannot nest that deep here: %v", err)
		}
	}
	if _, err := Snapshot(root, Limits{}, nil); !errors.Is(err, ErrTooBig) {
		t.Errorf("a tree %d folders deep: err %v, want ErrTooBig", maxDepth+2, err)
	}
}
