package untrusted

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Kind is what an entry is, as lstat saw it.
type Kind string

const (
	File    Kind = "file"
	Dir     Kind = "dir"
	Symlink Kind = "symlink"
	// Other is a fifo, socket or device node: listed, never opened.
	Other Kind = "other"
)

// Entry is one thing a walk found. A link is an entry of its own, never the
// thing it points at.
type Entry struct {
	Kind   Kind
	Perm   fs.FileMode // permission bits (with setuid, setgid, sticky)
	Size   int64       // a file's size; 0 for the rest
	Target string      // a link's text, as readlink gives it
}

// Limits bound one walk. Zero means no bound.
type Limits struct {
	Entries int   // entries listed, folders included
	Bytes   int64 // bytes read from files through the readers a walk hands out
}

// ErrTooBig means a tree was past one of a walk's Limits; the walk stopped
// there.
var ErrTooBig = errors.New("past the walk's cap")

// maxDepth bounds nesting: each level holds a descriptor open.
const maxDepth = 256

// Visit is called once per entry, a folder's entries in name order and a
// folder before what it holds; rel is slash-separated and relative to the
// root. For a File, r reads its content from a descriptor opened without
// following links (at most Size bytes); r is nil for the rest. Returning
// fs.SkipDir for a Dir leaves it unread; any other error ends the walk.
type Visit func(rel string, e Entry, r io.Reader) error

// Walk visits every entry under root. Root itself must be a folder and not a
// link. Descriptors are opened relative to their parent's descriptor with
// O_NOFOLLOW, so a link swapped in anywhere in the tree is met as a link,
// never followed, even while the walk runs.
func Walk(root string, lim Limits, visit Visit) error {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: root, Err: err}
	}
	w := &walker{root: root, lim: lim, visit: visit}
	return w.dir(fd, "", 0)
}

type walker struct {
	root    string
	lim     Limits
	visit   Visit
	entries int
	read    int64
}

func (w *walker) dir(fd int, rel string, depth int) error {
	d := os.NewFile(uintptr(fd), filepath.Join(w.root, rel))
	defer d.Close()
	if depth > maxDepth {
		return fmt.Errorf("%s: nested more than %d folders deep: %w", d.Name(), maxDepth, ErrTooBig)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		w.entries++
		if w.lim.Entries > 0 && w.entries > w.lim.Entries {
			return fmt.Errorf("%s: more than %d entries: %w", w.root, w.lim.Entries, ErrTooBig)
		}
		child := path.Join(rel, name)
		full := filepath.Join(w.root, child)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "lstat", Path: full, Err: err}
		}
		e := Entry{Perm: fs.FileMode(st.Mode & 0o7777)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Kind = Dir
			if err := w.visit(child, e, nil); err == fs.SkipDir {
				continue
			} else if err != nil {
				return err
			}
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return &fs.PathError{Op: "open", Path: full, Err: err}
			}
			if err := w.dir(cfd, child, depth+1); err != nil {
				return err
			}
		case unix.S_IFREG:
			e.Kind, e.Size = File, st.Size
			if err := w.file(fd, name, full, child, e, st); err != nil {
				return err
			}
		case unix.S_IFLNK:
			e.Kind = Symlink
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				return &fs.PathError{Op: "readlink", Path: full, Err: err}
			}
			e.Target = string(buf[:n])
			if err := w.visit(child, e, nil); err != nil {
				return err
			}
		default:
			e.Kind = Other
			if err := w.visit(child, e, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// file opens a regular file without following a link and without blocking
// (a fifo swapped in after the lstat would otherwise hang the walk), and
// checks that the descriptor is still the file the lstat saw.
func (w *walker) file(dirfd int, name, full, rel string, e Entry, was unix.Stat_t) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: full, Err: err}
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: full, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != was.Ino || st.Dev != was.Dev {
		return fmt.Errorf("%s: replaced while it was read (was a regular file)", full)
	}
	return w.visit(rel, e, &capped{r: io.LimitReader(f, e.Size), w: w})
}

// capped counts what a visitor reads against the walk's byte cap.
type capped struct {
	r io.Reader
	w *walker
}

func (c *capped) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.w.read += int64(n)
	if c.w.lim.Bytes > 0 && c.w.read > c.w.lim.Bytes {
		return n, fmt.Errorf("%s: more than %d bytes of files: %w", c.w.root, c.w.lim.Bytes, ErrTooBig)
	}
	return n, err
}
