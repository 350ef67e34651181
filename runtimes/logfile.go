package runtimes

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A runtime's log lies in its work folder, which the contained process may
// write: it can remove the log and leave a symlink (or a hard link, a FIFO)
// in its place. rig, as root, must then neither write through that name nor
// read another file back through it. The log is created without following a
// link and must be a regular file with one name; the sandbox then reads it
// back through a descriptor opened on that same file at creation, and readers
// by path (openLog) refuse anything else.

// logTailBytes bounds what a tail reads: error messages quote a few lines.
const logTailBytes = 64 << 10

// maxLogReadBytes bounds what ReadLog returns of a log: what a runtime and
// the processes in its sandbox wrote, which nothing else holds to a size.
// Its readers look for a model's load report and a failed allocation, which
// a load writes in its first megabytes (a verbose llama-server load logs
// every tensor: about 1 MB for a model of a few hundred tensors); 32 MiB is
// many loads, and a log past it is not read further.
const maxLogReadBytes = 32 << 20

// createLog opens path for appending the sandbox's output, and a second,
// read-only descriptor on the same file for reading it back.
func createLog(path string) (w, r *os.File, err error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, nil, fmt.Errorf("sandbox log %s is a symbolic link, which a contained process may have left there: remove it, or use a fresh work folder", path)
		}
		return nil, nil, fmt.Errorf("sandbox log %s: %w", path, err)
	}
	w = os.NewFile(uintptr(fd), path)
	if err := checkLogFile(w); err != nil {
		w.Close()
		return nil, nil, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		w.Close()
		return nil, nil, err
	}
	// Reopening through our own descriptor names the inode, not the path.
	r, err = os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY, 0)
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("sandbox log %s: reopening for reading: %w", path, err)
	}
	return w, r, nil
}

// checkLogFile refuses what is not a regular file with a single name.
func checkLogFile(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("sandbox log %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("sandbox log %s is not a regular file (mode %o), which a contained process may have left there: remove it, or use a fresh work folder", f.Name(), st.Mode)
	}
	if st.Nlink != 1 {
		return fmt.Errorf("sandbox log %s has %d names (a hard link to another file?): remove it, or use a fresh work folder", f.Name(), st.Nlink)
	}
	return nil
}

// openLog opens a log that a contained process could have replaced, for
// reading: never through a symlink, and only a regular file with one name.
func openLog(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("log %s is a symbolic link; not read", path)
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkLogFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadLog returns the content of a runtime's log (see LogPath), read as
// openLog does; callers outside this package read logs through it. A log
// past maxLogReadBytes gives its first maxLogReadBytes with an error wrapping
// ErrTooLarge: a reader after the load report still finds it there.
func ReadLog(path string) ([]byte, error) {
	f, err := openLog(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	return readCapped(f, size, maxLogReadBytes, "maxLogReadBytes", "the log "+path+" (written by a contained process)")
}

// readTail returns the last n lines of what f holds (at most logTailBytes).
func readTail(f *os.File, n int) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-logTailBytes, 0)
	b := make([]byte, fi.Size()-off)
	k, _ := f.ReadAt(b, off)
	lines := strings.Split(strings.TrimRight(string(b[:k]), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
