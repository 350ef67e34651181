package genrecord

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Writer appends rows to a record, one fsync'd line per call. Each line is
// handed to the kernel in a single write on an O_APPEND file, so a killed
// process leaves either the whole line or, after power loss, a torn tail
// that readers report.
type Writer struct {
	mu     sync.Mutex
	f      *os.File
	path   string
	pins   Pins
	hash   hash.Hash
	ids    map[string]bool
	rows   int
	broken error
	// write is f.Write; tests replace it to tear lines on purpose.
	write func([]byte) (int, error)
}

// OpenWriter creates the record with its header, or reopens an existing one
// after checking that every line is whole and its header's pins equal pins.
// A torn tail is returned as a *TornLineError: call Salvage, then reopen.
func OpenWriter(path string, pins Pins) (*Writer, error) {
	if err := pins.Validate(); err != nil {
		return nil, fmt.Errorf("%s: cannot start the record: %w", path, err)
	}
	w := &Writer{path: path, pins: pins, hash: sha256.New(), ids: map[string]bool{}}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) || err == nil && st.Size() == 0:
		if err := w.create(); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("open generation record: %w", err)
	default:
		if err := w.resume(); err != nil {
			return nil, err
		}
	}
	w.write = w.f.Write
	return w, nil
}

func (w *Writer) create() error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("create generation record: %w", err)
	}
	w.f = f
	line, err := encodeLine(Header{Kind: KindHeader, SchemaVersion: SchemaVersion, Pins: w.pins})
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: encode header: %w", w.path, err)
	}
	if err := w.commit(line, 1); err != nil {
		f.Close()
		return err
	}
	// The directory entry must be durable too, or a crash can lose the
	// whole file even though its lines were synced.
	if d, err := os.Open(filepath.Dir(w.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func (w *Writer) resume() error {
	f, err := os.Open(w.path)
	if err != nil {
		return fmt.Errorf("reopen generation record: %w", err)
	}
	defer f.Close()
	rd, err := NewReader(io.TeeReader(f, w.hash), w.path)
	if err != nil {
		return fmt.Errorf("reopen generation record: %w", err)
	}
	if diffs := rd.Header().Pins.Diff(w.pins); len(diffs) > 0 {
		return fmt.Errorf("%s:1: %w: %v (a record holds one stack; start a new record file for these pins)", w.path, ErrPinsDiffer, diffs)
	}
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reopen generation record: %w", err)
		}
		w.ids[row.RowID] = true
		w.rows++
	}
	af, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("reopen generation record: %w", err)
	}
	w.f = af
	return nil
}

// Append validates row, writes it as one line and fsyncs. Kind is set to
// "row" when empty. After a failed write the Writer refuses further rows:
// the file may end in a torn line that must be salvaged first.
func (w *Writer) Append(row Row) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return fmt.Errorf("%s: %w: %v", w.path, ErrWriterBroken, w.broken)
	}
	if row.Kind == "" {
		row.Kind = KindRow
	}
	if le := row.validate(); le != nil {
		le.Path, le.Line = w.path, w.rows+2
		return le
	}
	if w.ids[row.RowID] {
		return &LineError{Path: w.path, Line: w.rows + 2, Field: "row_id", Err: fmt.Errorf("%w: %q is already in the record", ErrDuplicateRow, row.RowID)}
	}
	line, err := encodeLine(row)
	if err != nil {
		return fmt.Errorf("%s: encode row %q: %w", w.path, row.RowID, err)
	}
	if err := w.commit(line, w.rows+2); err != nil {
		return err
	}
	w.ids[row.RowID] = true
	w.rows++
	return nil
}

// commit writes one complete line in a single write and syncs it.
func (w *Writer) commit(line []byte, lineNo int) error {
	write := w.write
	if write == nil {
		write = w.f.Write
	}
	n, err := write(line)
	if err == nil && n != len(line) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		w.broken = err
		return fmt.Errorf("%s: write line %d: %w", w.path, lineNo, err)
	}
	w.hash.Write(line)
	return nil
}

// encodeLine marshals v without HTML escaping, so prompts keep their
// "<|im_start|>" markers readable, and ends it with one newline.
func encodeLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EmptySum is the hex sha256 of no bytes: the GenerationSHA256 a receipt
// carries for a counted trial that made no model call, so that its evidence
// says "no call" rather than being missing.
const EmptySum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Sum returns the hex sha256 of every byte in the record so far, for the
// receipt.
func (w *Writer) Sum() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return hex.EncodeToString(w.hash.Sum(nil))
}

// Rows returns the number of rows in the record.
func (w *Writer) Rows() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rows
}

// Path returns the record's file name.
func (w *Writer) Path() string { return w.path }

// Close closes the file. Every appended line is already synced.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if w.broken == nil {
		w.broken = errors.New("writer closed")
	}
	return err
}

// Has reports whether a row with that id is already in the record: a merge
// that is retried after it appended some rows skips those.
func (w *Writer) Has(rowID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ids[rowID]
}
