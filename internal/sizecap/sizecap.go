// Package sizecap is the one size check on a user's file, made before any
// parser sees it: a whole file against its kind's cap (its size from Stat,
// then a read that stops one byte past the cap, for a file that grows or a
// pipe), and one line of a line-per-record file against its cap while the
// line is read. The error names the file, what it holds, the cap and the
// fix. It is not a quota and it does not parse anything; the caps
// themselves belong to the package that reads each kind of file.
package sizecap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrTooLarge is wrapped by every *Error.
var ErrTooLarge = errors.New("over its size cap")

// Error is a file, or one line of it, over its cap.
type Error struct {
	Path  string // the file as the user named it
	What  string // what the file holds: "study design", "task bank line"
	Line  int    // 1-based line number when a line is over its cap; 0 for the whole file
	Size  int64  // the size seen; at least Limit+1 when the read stopped at the cap
	Limit int64
	Fix   string // what to do, in the user's words
	Exact bool   // Size is the whole size (from Stat), not where the read stopped
}

func (e *Error) Error() string {
	where := e.Path
	if e.Line > 0 {
		where = fmt.Sprintf("%s: line %d", e.Path, e.Line)
	}
	size := "more than " + Bytes(e.Limit)
	if e.Exact {
		size = Bytes(e.Size)
	}
	return fmt.Sprintf("%s: the %s is %s, over rig's cap of %s (%s)", where, e.What, size, Bytes(e.Limit), e.Fix)
}

func (e *Error) Unwrap() error { return ErrTooLarge }

// Bytes words a size as people read it.
func Bytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// Cap is one kind of file's limit and the fix its error offers.
type Cap struct {
	What  string
	Limit int64
	Fix   string
}

// ReadFile reads path whole, refusing it without reading when Stat says it
// is over the cap, and stopping one byte past the cap otherwise.
func (c Cap) ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := c.Check(f, path); err != nil {
		return nil, err
	}
	return c.Read(f, path)
}

// Check refuses an open file whose Stat size is over the cap. A file that
// is not regular (a pipe, a device) passes: Read bounds it.
func (c Cap) Check(f *os.File, path string) error {
	st, err := f.Stat()
	if err == nil && st.Mode().IsRegular() && st.Size() > c.Limit {
		return &Error{Path: path, What: c.What, Size: st.Size(), Limit: c.Limit, Fix: c.Fix, Exact: true}
	}
	return nil
}

// Read reads r to its end, refusing it once it passes the cap.
func (c Cap) Read(r io.Reader, path string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, c.Limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > c.Limit {
		return nil, &Error{Path: path, What: c.What, Size: int64(len(b)), Limit: c.Limit, Fix: c.Fix}
	}
	return b, nil
}

// ReadLine reads one line through '\n' (the newline included, as
// bufio.Reader.ReadBytes returns it), refusing it once it passes the cap
// without holding more than the cap. line is the line's 1-based number,
// for the error. At the end of the input it returns what was left with
// io.EOF, as ReadBytes does.
func (c Cap) ReadLine(br *bufio.Reader, path string, line int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if int64(len(buf)+len(chunk)) > c.Limit {
			return nil, &Error{Path: path, What: c.What, Line: line, Size: int64(len(buf) + len(chunk)), Limit: c.Limit, Fix: c.Fix}
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}
