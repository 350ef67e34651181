package genrecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// FuzzRead feeds arbitrary bytes to the reader: it must never panic, every
// failure must be a LineError or TornLineError naming a line, and every row
// it accepts must survive a write/read round trip unchanged.
func FuzzRead(f *testing.F) {
	good := goodRecord(f, 3)
	f.Add(good)
	f.Add(good[:len(good)-17])
	f.Add(good[:bytes.IndexByte(good, '\n')+1])
	f.Add([]byte{})
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"kind":"header","schema_version":1}` + "\n"))
	f.Add(bytes.Replace(good, []byte(`"k":5`), []byte(`"k":4`), 1))
	f.Add(bytes.Replace(good, []byte(`"bytes":"dDE="`), []byte(`"bytes":[116,49]`), -1))
	f.Add(bytes.Replace(good, []byte(`"kind":"row"`), []byte("\"kind\":\"r\xffw\""), 1))
	f.Add(bytes.Replace(good, []byte(`"kind":"header"`), []byte("\"kind\":\"head\xc3\""), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := NewReader(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			checkNamed(t, err)
			return
		}
		for i := 0; i < 1000; i++ {
			row, err := rd.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				checkNamed(t, err)
				var torn *TornLineError
				if errors.As(err, &torn) {
					if _, again := rd.Next(); !errors.As(again, &torn) {
						t.Fatalf("torn line not sticky: %v", again)
					}
					return
				}
				continue
			}
			if le := row.Validate(); le != nil {
				t.Fatalf("reader returned an invalid row: %v", le)
			}
			line, err := encodeLine(row)
			if err != nil {
				t.Fatal(err)
			}
			var back Row
			if err := strictUnmarshal(line[:len(line)-1], &back); err != nil {
				t.Fatalf("accepted row does not re-read: %v", err)
			}
			a, _ := json.Marshal(row)
			b, _ := json.Marshal(back)
			if !bytes.Equal(a, b) {
				t.Fatalf("round trip changed the row:\n%s\n%s", a, b)
			}
		}
	})
}

func checkNamed(t *testing.T, err error) {
	t.Helper()
	var le *LineError
	var torn *TornLineError
	if !errors.As(err, &le) && !errors.As(err, &torn) {
		t.Fatalf("error does not name a line: %T %v", err, err)
	}
	if le != nil && le.Line < 1 {
		t.Fatalf("line number %d: %v", le.Line, err)
	}
}
