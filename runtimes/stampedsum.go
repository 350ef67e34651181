package runtimes

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// stampedSums caches the sha256 of runtime binaries and model files by the
// file's identity and change stamps. BuildOf runs before every trial a
// worker takes (the queue's build must be this machine's), and a runtime's
// start checks its model against the pin: hashing a 100 MB Ollama binary
// each trial, or a 10 GB GGUF at each switch between two arms, costs a
// fleet seconds to minutes per trial. The kernel moves ctime on any write,
// chmod or rename onto the path, and no unprivileged process can set it
// back, so a file changed in any way is hashed again.
var stampedSums sync.Map // path → stampedSum

// settled is how long a file must have been left alone for its sum to be
// kept: well over the kernel's coarse clock tick (at most 10 ms).
const settled = time.Second

type stampedSum struct {
	dev, ino, size uint64
	mtime, ctime   int64
	sum            string
}

func stampOf(st os.FileInfo) (stampedSum, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return stampedSum{}, false
	}
	return stampedSum{dev: uint64(sys.Dev), ino: sys.Ino, size: uint64(st.Size()),
		mtime: st.ModTime().UnixNano(), ctime: sys.Ctim.Nano()}, true
}

// stampedSHA256 is FileSHA256, cached while the file's stamps do not
// change.
func stampedSHA256(path string) (string, error) {
	before, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	stamp, ok := stampOf(before)
	if !ok {
		return FileSHA256(path)
	}
	if c, hit := stampedSums.Load(path); hit {
		if c := c.(stampedSum); c.sum != "" && c.dev == stamp.dev && c.ino == stamp.ino && c.size == stamp.size && c.mtime == stamp.mtime && c.ctime == stamp.ctime {
			return c.sum, nil
		}
	}
	sum, err := FileSHA256(path)
	if err != nil {
		return "", err
	}
	// Kept only if the file did not change while it was read, and had not
	// changed for a while before: the kernel stamps ctime from a coarse
	// clock, so two writes within one tick of it can share a ctime, and a
	// file written a moment ago could be written again unseen.
	if after, err := os.Stat(path); err == nil {
		if again, ok := stampOf(after); ok && again == stamp && time.Since(time.Unix(0, stamp.ctime)) > settled {
			stamp.sum = sum
			stampedSums.Store(path, stamp)
		}
	}
	return sum, nil
}
