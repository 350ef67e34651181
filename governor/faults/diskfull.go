package faults

import (
	"io"
	"syscall"
)

// FullDisk is a writer that accepts Room bytes and then fails with ENOSPC,
// as a filesystem that fills during a write does. It injects the
// disk-full-while-writing-a-record fault.
type FullDisk struct {
	W    io.Writer
	Room int
	n    int
}

// Write implements io.Writer.
func (f *FullDisk) Write(p []byte) (int, error) {
	left := f.Room - f.n
	if left <= 0 {
		return 0, syscall.ENOSPC
	}
	if len(p) <= left {
		n, err := f.W.Write(p)
		f.n += n
		return n, err
	}
	n, err := f.W.Write(p[:left])
	f.n += n
	if err != nil {
		return n, err
	}
	return n, syscall.ENOSPC
}
