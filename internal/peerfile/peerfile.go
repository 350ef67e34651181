// Package peerfile opens a file for a privileged process (the daemon, often
// root) on behalf of another account, only when that account could open it
// itself: read permission on the file and search permission on every folder
// on the way, judged from the account's uid and groups, with POSIX ACLs
// honoured. It is for a service that reads files named in a request; it is
// not an access-control system, and it does not read files for the daemon's
// own purposes.
//
// The walk is race-free: every component is opened relative to the folder
// before it with O_NOFOLLOW and judged on the descriptor, and symbolic links
// are resolved by the walk itself, so a link swapped in after the check
// cannot send the read elsewhere. That holds only for reads through the
// descriptor Open returns: a reader that checks here and then opens the path
// again can be sent elsewhere by a link swapped in between. A service that
// reads a file more than once opens it here each time (OpenAny is os.Open
// with the account's rights, for code that takes an opener).
package peerfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Cred is whose rights a file is opened with: the account's uid and every
// group it is in (its primary group too).
type Cred struct {
	UID  int
	GIDs []int
}

// ErrDenied means the account may not open the file.
var ErrDenied = errors.New("the caller may not read this file")

// DeniedError names the path that was asked for and the component that
// stopped the walk.
type DeniedError struct {
	Path   string // as asked for
	At     string // the folder or file the account may not pass or read
	Reason string
	// Err is the system's error where there was one (a missing file's
	// fs.ErrNotExist), so that a reader that treats a missing file as empty
	// still can.
	Err error
}

func (e *DeniedError) Error() string {
	if e.At == e.Path || e.At == "" {
		return fmt.Sprintf("%s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.Path, e.At, e.Reason)
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// Unwrap is the system's error, if any.
func (e *DeniedError) Unwrap() error { return e.Err }

// maxLinks is how many symbolic links one path may pass through, as the
// kernel's own limit.
const maxLinks = 40

// Open opens path for reading as who could: a regular file, read permission
// on it, search permission on every folder of its resolved path. A missing
// file, a folder the account may not search, a link loop and a file it may
// not read are all a *DeniedError (a missing file under a folder the
// account may not search is told apart from nothing: it is denied at the
// folder).
func Open(path string, who Cred) (*os.File, error) { return open(path, who, false) }

// OpenAny is Open, or, when path is a folder, the folder for listing (read
// permission on it, as open(2) asks): os.Open with who's rights, for code
// that reads a folder's entries (each then opened here on its own).
func OpenAny(path string, who Cred) (*os.File, error) { return open(path, who, true) }

func open(path string, who Cred, folderOK bool) (*os.File, error) {
	// Not filepath.Abs: it cleans "link/.." lexically, which is not where
	// the kernel would go.
	abs := path
	if !strings.HasPrefix(path, "/") {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		abs = wd + "/" + path
	}
	// dirs is the stack of folders walked so far, each a real folder (no
	// link) opened O_PATH: ".." pops it, so it means what the kernel means.
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	dirs := []walkedDir{{root, "/"}}
	defer func() {
		for _, d := range dirs {
			unix.Close(d.fd)
		}
	}()
	rest := components(abs)
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		cur := dirs[len(dirs)-1]
		switch name {
		case ".":
			continue
		case "..":
			if len(dirs) > 1 {
				unix.Close(cur.fd)
				dirs = dirs[:len(dirs)-1]
			}
			continue
		}
		if err := mayEnter(cur, path, who); err != nil {
			return nil, err
		}
		full := filepath.Join(cur.name, name)
		fd, err := unix.Openat(cur.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, failedAt(path, full, "cannot be opened", err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := readlink(fd)
			unix.Close(fd)
			if err != nil {
				return nil, denied(path, full, "a symbolic link that cannot be read: "+err.Error())
			}
			if links++; links > maxLinks {
				return nil, denied(path, full, "too many symbolic links")
			}
			if strings.HasPrefix(target, "/") {
				for _, d := range dirs[1:] {
					unix.Close(d.fd)
				}
				dirs = dirs[:1]
			}
			rest = append(components(target), rest...)
		case unix.S_IFDIR:
			dirs = append(dirs, walkedDir{fd, full})
		default:
			return openFileAt(fd, &st, full, len(rest) > 0, path, who)
		}
	}
	if !folderOK {
		return nil, denied(path, dirs[len(dirs)-1].name, "is a folder, not a file")
	}
	return openFolderAt(dirs[len(dirs)-1], path, who)
}

// walkedDir is a folder open walks through: its O_PATH descriptor and its
// resolved path.
type walkedDir struct {
	fd   int
	name string // its resolved path
}

// mayEnter refuses a folder who may not search.
func mayEnter(cur walkedDir, path string, who Cred) error {
	var st unix.Stat_t
	if err := unix.Fstat(cur.fd, &st); err != nil {
		return err
	}
	if !allowed(cur.fd, &st, who, 1) {
		return denied(path, cur.name, "the caller may not enter this folder (no search permission)")
	}
	return nil
}

func denied(path, at, reason string) error {
	return &DeniedError{Path: path, At: at, Reason: reason}
}

func failedAt(path, at, reason string, err error) error {
	return &DeniedError{Path: path, At: at, Reason: reason + ": " + err.Error(), Err: err}
}

// openFileAt opens for reading the file at fd (resolved to full, with st its
// status) that the walk of path ended on, if who may read it. It closes fd.
// beforeEnd says the path goes on past it, as through a folder.
func openFileAt(fd int, st *unix.Stat_t, full string, beforeEnd bool, path string, who Cred) (*os.File, error) {
	defer unix.Close(fd)
	if beforeEnd {
		return nil, denied(path, full, "is not a folder")
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, denied(path, full, "is not a regular file")
	}
	if !allowed(fd, st, who, 4) {
		return nil, denied(path, full, fmt.Sprintf("the caller may not read this file (mode %04o, owner uid %d, group gid %d)", st.Mode&0o7777, st.Uid, st.Gid))
	}
	f, err := reopen(fd, st, 0, path)
	if err != nil {
		return nil, failedAt(path, full, "cannot be opened", err)
	}
	return f, nil
}

// openFolderAt opens for listing the folder the walk of path ended on, if
// who may read it.
func openFolderAt(last walkedDir, path string, who Cred) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(last.fd, &st); err != nil {
		return nil, err
	}
	if !allowed(last.fd, &st, who, 4) {
		return nil, denied(path, last.name, fmt.Sprintf("the caller may not list this folder (mode %04o, owner uid %d, group gid %d)", st.Mode&0o7777, st.Uid, st.Gid))
	}
	f, err := reopen(last.fd, &st, unix.O_DIRECTORY, path)
	if err != nil {
		return nil, failedAt(path, last.name, "cannot be opened", err)
	}
	return f, nil
}

// errChanged is an inode that reopening through its descriptor did not give.
var errChanged = errors.New("it changed while it was being opened")

// reopen opens the very inode judged, through its O_PATH descriptor, for
// reading, and names the file as it was asked for (name), so a reader's
// errors name what the request named.
func reopen(fd int, st *unix.Stat_t, flags int, name string) (*os.File, error) {
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, err
	}
	var again unix.Stat_t
	if err := unix.Fstat(rfd, &again); err != nil || again.Ino != st.Ino || again.Dev != st.Dev {
		unix.Close(rfd)
		return nil, errChanged
	}
	return os.NewFile(uintptr(rfd), name), nil
}

// ReadFile is Open, then up to max bytes of the file; a longer file is an
// error naming the limit.
func ReadFile(path string, who Cred, max int64) ([]byte, error) {
	f, err := Open(path, who)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: over %d bytes", path, max)
	}
	return b, nil
}

// Check reports whether who could open path for reading (Open, then close).
func Check(path string, who Cred) error {
	f, err := Open(path, who)
	if err != nil {
		return err
	}
	return f.Close()
}

func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

func readlink(fd int) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	if n == len(buf) {
		return "", errors.New("target too long")
	}
	return string(buf[:n]), nil
}

// allowed says whether who holds every bit of want (4 read, 1 search) on the
// inode st describes, as the kernel would judge it: root may read any file
// and search any folder; otherwise the owner's, a matching group's or
// others' bits, or the file's access ACL when it has one.
func allowed(fd int, st *unix.Stat_t, who Cred, want uint32) bool {
	if who.UID == 0 {
		return true
	}
	if acl, ok := accessACL(fd); ok {
		return acl.allows(st, who, want)
	}
	mode := st.Mode
	switch {
	case int(st.Uid) == who.UID:
		return (mode>>6)&want == want
	case slices.Contains(who.GIDs, int(st.Gid)):
		return (mode>>3)&want == want
	default:
		return mode&want == want
	}
}

// The entries of a POSIX access ACL as Linux stores it in the
// system.posix_acl_access attribute.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

type aclEntry struct {
	tag  uint16
	perm uint32
	id   uint32
}

type acl []aclEntry

// accessACL reads the descriptor's access ACL; ok is false when it has none
// beyond its mode bits.
func accessACL(fd int) (acl, bool) {
	buf := make([]byte, 4+8*64)
	n, err := unix.Getxattr("/proc/self/fd/"+strconv.Itoa(fd), "system.posix_acl_access", buf)
	if err != nil || n < 4 || (n-4)%8 != 0 || binary.LittleEndian.Uint32(buf) != 2 {
		return nil, false
	}
	var a acl
	for off := 4; off < n; off += 8 {
		a = append(a, aclEntry{tag: binary.LittleEndian.Uint16(buf[off:]), perm: uint32(binary.LittleEndian.Uint16(buf[off+2:])), id: binary.LittleEndian.Uint32(buf[off+4:])})
	}
	return a, true
}

// allows is the kernel's ACL check (posix_acl_permission): the owner entry
// for the owner; a named user entry, masked; else any matching group entry
// that grants, masked (matching groups that all refuse refuse); else others.
func (a acl) allows(st *unix.Stat_t, who Cred, want uint32) bool {
	mask := uint32(7)
	for _, e := range a {
		if e.tag == aclMask {
			mask = e.perm
		}
	}
	for _, e := range a {
		switch {
		case e.tag == aclUserObj && int(st.Uid) == who.UID:
			return e.perm&want == want
		case e.tag == aclUser && int(e.id) == who.UID:
			return e.perm&mask&want == want
		}
	}
	matched := false
	for _, e := range a {
		var in bool
		switch e.tag {
		case aclGroupObj:
			in = slices.Contains(who.GIDs, int(st.Gid))
		case aclGroup:
			in = slices.Contains(who.GIDs, int(e.id))
		}
		if in {
			matched = true
			if e.perm&mask&want == want {
				return true
			}
		}
	}
	if matched {
		return false
	}
	for _, e := range a {
		if e.tag == aclOther {
			return e.perm&want == want
		}
	}
	return false
}
