package genrecord

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeRecord(t *testing.T, path string, rows []Row) *Writer {
	t.Helper()
	w, err := OpenWriter(path, testPins())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func TestWriteReadRoundTrip(t *testing.T) {
	m := fakeModel{salt: "smol", vocab: 40}
	var rows []Row
	for i := 0; i < 12; i++ {
		rows = append(rows, makeRow(m, i, 3+i))
	}
	// A gap step: the runtime gave text but no log-prob; counted, not padded.
	rows[3].Output[1] = Step{Text: rows[3].Output[1].Text}
	rows[3].LogprobsMissingSteps = 1
	// Alternatives without ids, as Ollama returns them.
	rows[4].Output[0].ID = nil
	rows[4].Output[0].Top[0].ID = nil

	path := filepath.Join(t.TempDir(), "generations.jsonl")
	w := writeRecord(t, path, rows)
	sum := w.Sum()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fileSum, err := SumFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum != fileSum {
		t.Fatalf("Writer.Sum %s, file sha256 %s", sum, fileSum)
	}
	if err := VerifySum(path, "sha256:"+sum); err != nil {
		t.Fatal(err)
	}
	h, got, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h.Pins, testPins()) {
		t.Errorf("header pins %+v, want %+v", h.Pins, testPins())
	}
	if !reflect.DeepEqual(got, rows) {
		t.Fatalf("rows differ after round trip:\n got %+v\nwant %+v", got[3], rows[3])
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "<|im_start|>") {
		t.Error("prompt markers were HTML-escaped; the record should keep them readable")
	}
	if n := strings.Count(string(data), "\n"); n != len(rows)+1 {
		t.Errorf("%d lines, want header + %d rows", n, len(rows))
	}
}

func TestWriterReopen(t *testing.T) {
	m := fakeModel{salt: "smol", vocab: 40}
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	w := writeRecord(t, path, []Row{makeRow(m, 0, 4), makeRow(m, 1, 4)})
	w.Close()

	t.Run("same pins appends", func(t *testing.T) {
		w, err := OpenWriter(path, testPins())
		if err != nil {
			t.Fatal(err)
		}
		if w.Rows() != 2 {
			t.Errorf("reopened writer counts %d rows, want 2", w.Rows())
		}
		err = w.Append(makeRow(m, 1, 4))
		if !errors.Is(err, ErrDuplicateRow) {
			t.Errorf("duplicate row id after reopen: err %v, want ErrDuplicateRow", err)
		}
		if err := w.Append(makeRow(m, 2, 4)); err != nil {
			t.Fatal(err)
		}
		sum := w.Sum()
		w.Close()
		if err := VerifySum(path, sum); err != nil {
			t.Fatalf("Sum after reopen does not cover the whole file: %v", err)
		}
		_, rows, err := ReadAll(path)
		if err != nil || len(rows) != 3 {
			t.Fatalf("read back %d rows, err %v; want 3", len(rows), err)
		}
	})
	for _, tc := range []struct {
		name  string
		edit  func(*Pins)
		field string
	}{
		{"other model", func(p *Pins) { p.ModelSHA256 = strings.Repeat("f", 64) }, "model_sha256"},
		{"other library", func(p *Pins) { p.Libraries["/opt/rig/lib/libggml.so"] = strings.Repeat("0", 64) }, "libggml.so"},
		{"other design", func(p *Pins) { p.DesignHash = "x" }, "design_hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPins()
			tc.edit(&p)
			_, err := OpenWriter(path, p)
			if !errors.Is(err, ErrPinsDiffer) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err %v, want ErrPinsDiffer naming %s", err, tc.field)
			}
		})
	}
	// The record was begun before rig wrote the context: its execution
	// resumes at the same frozen context, which now says it.
	t.Run("a record without a context resumes", func(t *testing.T) {
		p := testPins()
		p.Context = 2048
		w, err := OpenWriter(path, p)
		if err != nil {
			t.Fatalf("resuming a record that names no context: %v", err)
		}
		w.Close()
	})
}

func TestWriterRejects(t *testing.T) {
	m := fakeModel{salt: "smol", vocab: 40}
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	p := testPins()
	p.BinarySHA256 = ""
	if _, err := OpenWriter(path, p); !errors.Is(err, ErrPinsMissing) || !strings.Contains(err.Error(), "binary_sha256") {
		t.Fatalf("missing pin: err %v", err)
	}
	w := writeRecord(t, path, nil)
	defer w.Close()
	bad := makeRow(m, 0, 3)
	bad.Output[2].Top = bad.Output[2].Top[:4]
	err := w.Append(bad)
	var le *LineError
	if !errors.As(err, &le) || !errors.Is(err, ErrWrongK) || le.Line != 2 || le.Field != "output[2].top" {
		t.Fatalf("wrong K: err %v, want LineError line 2 output[2].top ErrWrongK", err)
	}
	if w.Rows() != 0 {
		t.Errorf("a rejected row was counted")
	}
}

func TestWriterBrokenAfterTornWrite(t *testing.T) {
	m := fakeModel{salt: "smol", vocab: 40}
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	w := writeRecord(t, path, []Row{makeRow(m, 0, 3)})
	w.write = func(b []byte) (int, error) {
		n, _ := w.f.Write(b[:len(b)/2])
		return n, io.ErrShortWrite
	}
	if err := w.Append(makeRow(m, 1, 3)); err == nil {
		t.Fatal("a short write was not reported")
	}
	if err := w.Append(makeRow(m, 2, 3)); !errors.Is(err, ErrWriterBroken) {
		t.Fatalf("append after a torn write: err %v, want ErrWriterBroken", err)
	}
	w.Close()
	if _, err := OpenWriter(path, testPins()); !errors.Is(err, ErrTornLine) {
		t.Fatalf("reopen over a torn tail: err %v, want ErrTornLine", err)
	}
	torn, err := Salvage(path)
	if err != nil || torn == nil || torn.Line != 3 {
		t.Fatalf("salvage: torn %v err %v, want torn line 3", torn, err)
	}
	side, _ := os.ReadFile(path + ".torn")
	if len(side) != torn.Bytes+1 {
		t.Errorf("sidecar has %d bytes, torn fragment was %d", len(side), torn.Bytes)
	}
	w2, err := OpenWriter(path, testPins())
	if err != nil {
		t.Fatalf("reopen after salvage: %v", err)
	}
	if err := w2.Append(makeRow(m, 1, 3)); err != nil {
		t.Fatal(err)
	}
	w2.Close()
	if _, rows, err := ReadAll(path); err != nil || len(rows) != 2 {
		t.Fatalf("after salvage and append: %d rows, err %v", len(rows), err)
	}
}

// EmptySum is what a hash over no bytes gives, so a receipt's "no call"
// evidence matches a record that really holds nothing.
func TestEmptySumIsTheHashOfNoBytes(t *testing.T) {
	sum := sha256.Sum256(nil)
	if got := hex.EncodeToString(sum[:]); got != EmptySum {
		t.Fatalf("sha256 of no bytes is %s, EmptySum is %s", got, EmptySum)
	}
}
