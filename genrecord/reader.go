package genrecord

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"

	"rig/internal/jsonerr"
	"rig/internal/sizecap"
	"rig/internal/textcheck"
)

// MaxLineBytes bounds one line so a corrupt file cannot exhaust memory: a
// line is held whole, then decoded, so the cap sets the reader's peak (about
// twice the cap while the line's buffer grows). A row of 32k steps at the
// largest K (20) is about 36 MiB of JSON; a line past 64 MiB is refused as
// soon as the read passes the cap.
const MaxLineBytes = 64 << 20

// Reader streams a record: the header is read by NewReader, rows by Next.
type Reader struct {
	br     *bufio.Reader
	path   string
	line   int   // lines consumed so far
	offset int64 // bytes consumed so far
	header Header
	seen   map[string]int // row_id → line
	rows   int
	hash   hash.Hash
	closer io.Closer
	done   error // sticky terminal error (io.EOF, torn line)
}

// NewReader reads and validates the header. path is used in messages only.
func NewReader(r io.Reader, path string) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 64<<10), path: path, seen: map[string]int{}, hash: sha256.New()}
	raw, err := rd.readLine()
	if err == nil {
		err = rd.checkUTF8(raw, 1, 0, ErrNoHeader)
	}
	if errors.Is(err, io.EOF) {
		return nil, &LineError{Path: path, Line: 1, Err: fmt.Errorf("%w: the file is empty (a record starts with its header line; was the run killed before its first call?)", ErrNoHeader)}
	}
	if err != nil {
		return nil, err
	}
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &probe); err == nil && probe.Kind != KindHeader {
		return nil, &LineError{Path: path, Line: 1, Field: "kind", Err: fmt.Errorf("%w: first line has kind %q, want %q (a record starts with its header; was the file cut or concatenated?)", ErrNoHeader, probe.Kind, KindHeader)}
	}
	var h Header
	if err := strictUnmarshal(raw, &h); err != nil {
		return nil, &LineError{Path: path, Line: 1, Err: fmt.Errorf("%w: %v", ErrNoHeader, err)}
	}
	if le := h.validate(); le != nil {
		le.Path = path
		return nil, le
	}
	rd.header = h
	return rd, nil
}

// OpenReader opens a record file for streaming; Close releases it.
func OpenReader(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open generation record: %w", err)
	}
	rd, err := NewReader(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	rd.closer = f
	return rd, nil
}

// Close closes the file opened by OpenReader.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// Header returns the record's header.
func (r *Reader) Header() Header { return r.header }

// Line returns the number of lines consumed, so the last row read is on
// line Line().
func (r *Reader) Line() int { return r.line }

// Rows returns the number of rows read so far.
func (r *Reader) Rows() int { return r.rows }

// Offset returns the number of bytes of complete lines consumed.
func (r *Reader) Offset() int64 { return r.offset }

// Sum returns the hex sha256 of the complete lines consumed so far. After
// Next has returned io.EOF it is the sha256 of the whole file.
func (r *Reader) Sum() string { return hex.EncodeToString(r.hash.Sum(nil)) }

// Next returns the next row. At the end it returns io.EOF; a torn last line
// gives a *TornLineError (errors.Is ErrTornLine) after every complete row
// has been returned; any other bad line, one that is not UTF-8 included,
// gives a *LineError.
func (r *Reader) Next() (Row, error) {
	if r.done != nil {
		return Row{}, r.done
	}
	start := r.offset
	raw, err := r.readLine()
	if err == nil {
		err = r.checkUTF8(raw, r.line, start, ErrBadRow)
	}
	if err != nil {
		var torn *TornLineError
		if errors.Is(err, io.EOF) || errors.As(err, &torn) {
			r.done = err
		}
		return Row{}, err
	}
	line := r.line
	if len(bytes.TrimSpace(raw)) == 0 {
		return Row{}, &LineError{Path: r.path, Line: line, Err: fmt.Errorf("%w: empty line (the writer never writes one; the file was edited)", ErrBadRow)}
	}
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return Row{}, &LineError{Path: r.path, Line: line, Err: fmt.Errorf("%w: %s", ErrBadRow, jsonerr.Message(err))}
	}
	if probe.Kind != KindRow {
		return Row{}, &LineError{Path: r.path, Line: line, Field: "kind", Err: fmt.Errorf("%w: %q, want %q (only line 1 is a header)", ErrBadRow, probe.Kind, KindRow)}
	}
	var row Row
	if err := strictUnmarshal(raw, &row); err != nil {
		return Row{}, &LineError{Path: r.path, Line: line, Err: fmt.Errorf("%w: %v", ErrBadRow, err)}
	}
	if le := row.validate(); le != nil {
		le.Path, le.Line = r.path, line
		return Row{}, le
	}
	if prev, dup := r.seen[row.RowID]; dup {
		return Row{}, &LineError{Path: r.path, Line: line, Field: "row_id", Err: fmt.Errorf("%w: %q is also on line %d", ErrDuplicateRow, row.RowID, prev)}
	}
	r.seen[row.RowID] = line
	r.rows++
	return row, nil
}

// readLine returns one complete line without its newline and hashes it.
func (r *Reader) readLine() ([]byte, error) {
	// A long line is kept as the buffer's chunks and joined once at its
	// end: appending to one growing slice copied a line over the cap about
	// twice and took most of a second to refuse (TestBigInputsAreRefusedAtTheDoor).
	var parts [][]byte
	n := 0
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		n += len(chunk)
		if n > MaxLineBytes {
			return nil, &LineError{Path: r.path, Line: r.line + 1, Err: fmt.Errorf("%w: the line is over rig's cap of %s (a row of 32k tokens at top-K 20 is about 36 MiB; this is not a record rig wrote: name the generations.jsonl of an execution)", ErrBadRow, sizecap.Bytes(MaxLineBytes))}
		}
		if err == nil {
			if len(parts) == 0 {
				buf = append([]byte(nil), chunk...)
			} else {
				buf = make([]byte, 0, n)
				for _, p := range parts {
					buf = append(buf, p...)
				}
				buf = append(buf, chunk...)
			}
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			parts = append(parts, append([]byte(nil), chunk...))
			continue
		}
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return nil, io.EOF
			}
			return nil, &TornLineError{Path: r.path, Line: r.line + 1, Offset: r.offset, Bytes: n}
		}
		return nil, fmt.Errorf("%s: read line %d: %w", r.name(), r.line+1, err)
	}
	r.line++
	r.offset += int64(len(buf))
	r.hash.Write(buf)
	return buf[:len(buf)-1], nil
}

// checkUTF8 refuses a line that is not UTF-8 before json turns its bad bytes
// into U+FFFD: the *LineError wraps class and a *textcheck.Error with the
// column and the file offset. start is the line's offset in the file.
func (r *Reader) checkUTF8(raw []byte, line int, start int64, class error) error {
	var ue *textcheck.Error
	if errors.As(textcheck.UTF8At(r.name(), raw, line, start), &ue) {
		return &LineError{Path: r.path, Line: line, Err: fmt.Errorf("%w: %w", class, ue.Unlocated())}
	}
	return nil
}

func (r *Reader) name() string {
	if r.path == "" {
		return "generations.jsonl"
	}
	return r.path
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// The decoder's own words name Go types ("Go struct field
		// Header.kind of type string"); say the JSON field and what it
		// should hold instead.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %q holds a JSON %s, want %s (see docs/generations.md for each field's type): %w", te.Field, te.Value, jsonerr.Kind(te.Type.Kind()), ErrBadType)
		}
		return errors.New(jsonerr.Message(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// ReadAll reads a whole record. On a torn last line it returns every
// complete row together with the *TornLineError.
func ReadAll(path string) (Header, []Row, error) {
	rd, err := OpenReader(path)
	if err != nil {
		return Header{}, nil, err
	}
	defer rd.Close()
	var rows []Row
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return rd.Header(), rows, nil
		}
		if err != nil {
			return rd.Header(), rows, err
		}
		rows = append(rows, row)
	}
}

// SumFile returns the hex sha256 of a file's bytes, as written on receipts.
func SumFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("sha256 of generation record: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("sha256 of %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LineSums returns the hex sha256 of every prefix of the file that ends at
// a line: LineSums[i] covers lines 1..i+1. A record is append-only and each
// trial's receipt keeps the sum of the record as that trial left it, so a
// genuine record has every receipt's sum among these, and the newest as
// the whole file's. whole is the sha256 of the whole file, torn last line
// included, from the same read.
func LineSums(path string) (prefixes []string, whole string, err error) {
	err = scanLines(path, func(h hash.Hash) { prefixes = append(prefixes, hex.EncodeToString(h.Sum(nil))) }, func(h hash.Hash, _ int64, _ int, _ bool) {
		whole = hex.EncodeToString(h.Sum(nil))
	})
	if err != nil {
		return nil, "", fmt.Errorf("sha256 of generation record: %w", err)
	}
	return prefixes, whole, nil
}

// scanLines hashes a record as it streams past, never holding more than a
// read buffer: a record is as long as its execution made it, and a line of
// it may be longer than any a reader would hold. atLine is called after each
// complete line, with the hash so far; atEnd once, with the whole file's
// hash, its size, its count of complete lines and whether a torn line ends it.
func scanLines(path string, atLine func(hash.Hash), atEnd func(h hash.Hash, size int64, lines int, torn bool)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	h := sha256.New()
	var size int64
	lines, torn := 0, false
	for {
		chunk, err := br.ReadSlice('\n')
		h.Write(chunk)
		size += int64(len(chunk))
		switch {
		case err == nil:
			lines++
			torn = false
			if atLine != nil {
				atLine(h)
			}
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			torn = true
			continue
		case errors.Is(err, io.EOF):
			atEnd(h, size, lines, torn || len(chunk) > 0)
			return nil
		}
		return err
	}
}

// VerifySum checks a record against the sha256 on its receipt ("sha256:"
// prefix allowed). A mismatch names both hashes and the file's line count.
func VerifySum(path, want string) error {
	want = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(want), "sha256:"))
	if !isSHA256(want) {
		return fmt.Errorf("%s: expected sha256 %q is not 64 hex digits (copy it from the receipt's generations_sha256)", path, want)
	}
	var got, tail string
	var size int64
	var lines int
	err := scanLines(path, nil, func(h hash.Hash, n int64, l int, torn bool) {
		got, size, lines = hex.EncodeToString(h.Sum(nil)), n, l
		if torn {
			tail = fmt.Sprintf(", plus a torn line %d", l+1)
		}
	})
	if err != nil {
		return fmt.Errorf("verify generation record: %w", err)
	}
	if got == want {
		return nil
	}
	return fmt.Errorf("%s: %w: file is %s (%d bytes, %d complete lines%s), receipt says %s (the record changed after the receipt was written: rows appended, truncated or edited; replay it only against the receipt that matches)",
		path, ErrSumMismatch, got, size, lines, tail, want)
}

// Salvage moves a torn last line aside into path+".torn" and truncates the
// record to its complete lines, so a Writer can append again. It returns the
// torn line it moved, or nil when the record was not torn. The record's
// sha256 changes; receipts written before the crash never covered the
// fragment.
func Salvage(path string) (*TornLineError, error) {
	rd, err := OpenReader(path)
	var torn *TornLineError
	if errors.As(err, &torn) {
		return nil, fmt.Errorf("%s: the header line itself is torn (the run died before its first row); delete the file and start the record again: %w", path, err)
	}
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for {
		_, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if errors.As(err, &torn) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("salvage: %w", err)
	}
	defer f.Close()
	frag := make([]byte, torn.Bytes)
	if _, err := f.ReadAt(frag, torn.Offset); err != nil {
		return nil, fmt.Errorf("salvage %s: read torn line: %w", path, err)
	}
	side, err := os.OpenFile(path+".torn", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("salvage: %w", err)
	}
	if _, err := side.Write(append(frag, '\n')); err != nil {
		side.Close()
		return nil, fmt.Errorf("salvage %s: %w", side.Name(), err)
	}
	if err := side.Sync(); err != nil {
		side.Close()
		return nil, fmt.Errorf("salvage %s: %w", side.Name(), err)
	}
	if err := side.Close(); err != nil {
		return nil, fmt.Errorf("salvage %s: %w", path+".torn", err)
	}
	if err := f.Truncate(torn.Offset); err != nil {
		return nil, fmt.Errorf("salvage %s: truncate: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("salvage %s: %w", path, err)
	}
	return torn, nil
}
