package genrecord

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkAppend measures one fsync'd row of 256 steps at K=5, the cost a
// study pays per kept call.
func BenchmarkAppend(b *testing.B) {
	m := fakeModel{salt: "smol", vocab: 40}
	row := makeRow(m, 0, 256)
	w, err := OpenWriter(filepath.Join(b.TempDir(), "generations.jsonl"), testPins())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		row.RowID = "r" + strconv.Itoa(i)
		if err := w.Append(row); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead measures streaming a record; replay reads before scoring.
func BenchmarkRead(b *testing.B) {
	data := goodRecord(b, 200)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		rd, err := NewReader(bytes.NewReader(data), "")
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := rd.Next(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}
