package runtimes

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// scratchInodes is how many files, folders and links a sandbox may add to
// its writable folders: a repository's tests and a package install need
// thousands, and each costs the kernel memory that tmpfs's size does not
// count.
const scratchInodes = 65536

// scratchFS holds a sandbox's writable folders on one tmpfs of fixed size
// while it runs, so that the cap on what it may write counts what the kernel
// really stores: files unlinked while held open, links, folders. (A walk
// over names, the fallback without root, sees none of those.)
//
// The tmpfs is mounted in a folder only root may enter; each writable
// folder's content is copied into it and the copy bound over the folder on
// the host, so the sandbox, and rig after it, find the folder where it was.
// Once the sandbox has ended, release copies what it left back onto the
// disk and unmounts. The pages the sandbox writes are charged to its memory
// cgroup, so the scratch is also bounded by its memory cap.
type scratchFS struct {
	mount   string          // the tmpfs, in a private folder of rig's
	folders []scratchFolder // the host folders bound from it
	done    bool
}

type scratchFolder struct {
	host string // the folder on the host
	sub  string // its copy's name inside mount
}

// newScratchFS moves folders onto a tmpfs that may grow by growth bytes and
// scratchInodes entries beyond what they hold now. A folder inside another
// goes with its parent.
func newScratchFS(folders []string, growth int64) (*scratchFS, error) {
	tops := topFolders(folders)
	mnt, err := os.MkdirTemp("", "rig-scratch-")
	if err != nil {
		return nil, err
	}
	s := &scratchFS{mount: mnt}
	var bytes, entries int64
	for _, f := range tops {
		b, n, err := footprint(f)
		if err != nil {
			os.Remove(mnt)
			return nil, fmt.Errorf("sandbox scratch: measuring %s: %w", f, err)
		}
		bytes, entries = bytes+b, entries+n
	}
	// Room for the copies first (each file rounded up to a page, and each
	// folder a page); the size is cut to what they took plus growth below.
	room := bytes + (entries+16)*int64(os.Getpagesize()) + growth
	opts := fmt.Sprintf("mode=0700,size=%d,nr_inodes=%d", room, entries+16+scratchInodes)
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		os.Remove(mnt)
		return nil, fmt.Errorf("sandbox scratch: mounting a tmpfs at %s: %w", mnt, err)
	}
	for i, f := range tops {
		sf := scratchFolder{host: f, sub: strconv.Itoa(i)}
		if err := copyTree(f, filepath.Join(mnt, sf.sub)); err != nil {
			s.abandon()
			return nil, fmt.Errorf("sandbox scratch: copying %s: %w", f, err)
		}
		if err := unix.Mount(filepath.Join(mnt, sf.sub), f, "", unix.MS_BIND, ""); err != nil {
			s.abandon()
			return nil, fmt.Errorf("sandbox scratch: binding over %s: %w", f, err)
		}
		s.folders = append(s.folders, sf)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		s.abandon()
		return nil, err
	}
	used := int64(st.Blocks-st.Bfree) * st.Bsize
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(used+growth, 10)); err != nil {
		s.abandon()
		return nil, fmt.Errorf("sandbox scratch: sizing %s: %w", mnt, err)
	}
	return s, nil
}

// full reports whether the sandbox filled its scratch: less than a page of
// room, or no entry left.
func (s *scratchFS) full() bool {
	var st unix.Statfs_t
	if s == nil || unix.Statfs(s.mount, &st) != nil {
		return false
	}
	return int64(st.Bavail)*st.Bsize < int64(os.Getpagesize()) || st.Ffree == 0
}

// release puts what the sandbox left in its folders back on the host's disk
// and unmounts the scratch. It runs once the sandbox has ended, when nothing
// writes there any more.
func (s *scratchFS) release() error {
	if s == nil || s.done {
		return nil
	}
	s.done = true
	var errs []error
	for _, f := range s.folders {
		if err := unix.Unmount(f.host, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmounting the scratch from %s: %w", f.host, err))
			continue
		}
		if err := emptyFolder(f.host); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := copyTree(filepath.Join(s.mount, f.sub), f.host); err != nil {
			errs = append(errs, fmt.Errorf("copying %s back from its scratch: %w", f.host, err))
		}
	}
	errs = append(errs, s.unmount())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sandbox scratch: %w", err)
	}
	return nil
}

// abandon unmounts without copying back: for a sandbox that never ran, whose
// folders' own content under the binds is unchanged.
func (s *scratchFS) abandon() {
	if s == nil || s.done {
		return
	}
	s.done = true
	for _, f := range s.folders {
		_ = unix.Unmount(f.host, unix.MNT_DETACH)
	}
	_ = s.unmount()
}

func (s *scratchFS) unmount() error {
	if err := unix.Unmount(s.mount, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting %s: %w", s.mount, err)
	}
	return os.Remove(s.mount)
}

// topFolders drops the folders that lie inside another of the list.
func topFolders(folders []string) []string {
	sorted := append([]string(nil), folders...)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) < len(sorted[j]) })
	var out []string
	for _, f := range sorted {
		inside := false
		for _, top := range out {
			if within(f, top) {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, filepath.Clean(f))
		}
	}
	return out
}

// footprint is the bytes of the regular files under root and its number of
// entries, links not followed.
func footprint(root string) (bytes, entries int64, err error) {
	err = filepath.WalkDir(root, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		entries++
		if e.Type().IsRegular() {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			bytes += fi.Size()
		}
		return nil
	})
	return bytes, entries, err
}

// emptyFolder removes what a folder holds, keeping the folder. RemoveAll
// never follows a link.
func emptyFolder(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the tree at src into dst (made if missing), keeping each
// entry's kind, permissions and owner. Links are copied as links, never
// followed; FIFOs are made anew; sockets and devices are left out. src may
// be what a contained process wrote, so nothing in it is trusted: it is no
// longer written to when this runs (the sandbox has ended), the walk reads
// links without following them, and every entry is created new in dst
// (O_EXCL, O_NOFOLLOW), below folders this copy made itself.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner", p)
		}
		mode := fi.Mode()
		switch {
		case mode.IsDir():
			if rel == "." {
				if err := os.MkdirAll(target, 0o700); err != nil {
					return err
				}
			} else if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
		case mode.IsRegular():
			if err := copyFileNoFollow(p, target); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		case mode&fs.ModeNamedPipe != 0:
			if err := unix.Mkfifo(target, 0o600); err != nil {
				return err
			}
		default:
			return nil // sockets and devices mean nothing once their maker is gone
		}
		if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		// The permissions and the sticky bit as they were, never setuid or
		// setgid: a contained process must not leave the host a program
		// that runs as the sandbox's user.
		return unix.Fchmodat(unix.AT_FDCWD, target, uint32(st.Mode&0o1777), 0)
	})
}

func copyFileNoFollow(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
