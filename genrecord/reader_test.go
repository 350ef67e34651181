package genrecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goodRecord returns a valid record's bytes with n rows.
func goodRecord(t testing.TB, n int) []byte {
	t.Helper()
	m := fakeModel{salt: "smol", vocab: 30}
	var buf bytes.Buffer
	line, err := encodeLine(Header{Kind: KindHeader, SchemaVersion: SchemaVersion, Pins: testPins()})
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(line)
	for i := 0; i < n; i++ {
		line, err := encodeLine(makeRow(m, i, 3))
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
	}
	return buf.Bytes()
}

// editLine rewrites line n (1-based) of a record through a map.
func editLine(t *testing.T, data []byte, n int, edit func(map[string]any)) []byte {
	t.Helper()
	lines := bytes.SplitAfter(data, []byte("\n"))
	var obj map[string]any
	if err := json.Unmarshal(lines[n-1], &obj); err != nil {
		t.Fatal(err)
	}
	edit(obj)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	lines[n-1] = append(b, '\n')
	return bytes.Join(lines, nil)
}

func readAllBytes(data []byte) (int, error) {
	rd, err := NewReader(bytes.NewReader(data), "gen.jsonl")
	if err != nil {
		return 0, err
	}
	for {
		_, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return rd.Rows(), nil
		}
		if err != nil {
			return rd.Rows(), err
		}
	}
}

func TestReaderBadInputs(t *testing.T) {
	good := goodRecord(t, 4)
	step := func(o map[string]any, i int) map[string]any {
		return o["output"].([]any)[i].(map[string]any)
	}
	for _, tc := range []struct {
		name     string
		data     []byte
		want     error
		line     int
		field    string
		rowsRead int
	}{
		{name: "empty file", data: nil, want: ErrNoHeader, line: 1},
		{name: "truncated mid-row", data: good[:len(good)-40], want: ErrTornLine, line: 5, rowsRead: 3},
		{name: "truncated mid-header", data: good[:30], want: ErrTornLine, line: 1},
		{name: "header missing pins", data: editLine(t, good, 1, func(o map[string]any) { delete(o, "pins") }), want: ErrPinsMissing, line: 1, field: "pins"},
		{name: "header missing one pin", data: editLine(t, good, 1, func(o map[string]any) {
			delete(o["pins"].(map[string]any), "model_sha256")
		}), want: ErrPinsMissing, line: 1, field: "pins"},
		{name: "header null libraries", data: editLine(t, good, 1, func(o map[string]any) {
			o["pins"].(map[string]any)["libraries"] = nil
		}), want: ErrPinsMissing, line: 1, field: "pins"},
		{name: "header weight_repack neither on nor off", data: editLine(t, good, 1, func(o map[string]any) {
			o["pins"].(map[string]any)["weight_repack"] = "maybe"
		}), want: ErrPinsMissing, line: 1, field: "pins"},
		{name: "header offload on an unknown backend", data: editLine(t, good, 1, func(o map[string]any) {
			o["pins"].(map[string]any)["offload"] = map[string]any{"backend": "rocm", "gpu_layers": -1}
		}), want: ErrPinsMissing, line: 1, field: "pins"},
		{name: "row first", data: good[bytes.IndexByte(good, '\n')+1:], want: ErrNoHeader, line: 1, field: "kind"},
		{name: "future schema", data: editLine(t, good, 1, func(o map[string]any) { o["schema_version"] = 2 }), want: ErrNoHeader, line: 1, field: "schema_version"},
		{name: "wrong K", data: editLine(t, good, 3, func(o map[string]any) {
			s := step(o, 1)
			s["top"] = s["top"].([]any)[:3]
		}), want: ErrWrongK, line: 3, field: "output[1].top", rowsRead: 1},
		{name: "k changed", data: editLine(t, good, 2, func(o map[string]any) { o["k"] = 6 }), want: ErrWrongK, line: 2, field: "output[0].top"},
		{name: "padded token count", data: editLine(t, good, 4, func(o map[string]any) { o["runtime_token_count"] = 5 }), want: ErrTokenCount, line: 4, field: "runtime_token_count", rowsRead: 2},
		{name: "positive logprob", data: editLine(t, good, 2, func(o map[string]any) { step(o, 0)["logprob"] = 0.5 }), want: ErrBadRow, line: 2, field: "output[0].logprob"},
		{name: "unknown field", data: editLine(t, good, 2, func(o map[string]any) { o["tokens"] = 3 }), want: ErrBadRow, line: 2},
		{name: "bad role", data: editLine(t, good, 2, func(o map[string]any) { o["role"] = "oracle" }), want: ErrBadRow, line: 2, field: "role"},
		{name: "duplicate id", data: editLine(t, good, 3, func(o map[string]any) { o["row_id"] = "r0000" }), want: ErrDuplicateRow, line: 3, field: "row_id", rowsRead: 1},
		{name: "second header", data: append(append([]byte{}, good...), good[:bytes.IndexByte(good, '\n')+1]...), want: ErrBadRow, line: 6, field: "kind", rowsRead: 4},
		{name: "blank line", data: append(append([]byte{}, good...), '\n'), want: ErrBadRow, line: 6, rowsRead: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := readAllBytes(tc.data)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			var le *LineError
			var torn *TornLineError
			switch {
			case errors.As(err, &le):
				if le.Line != tc.line || le.Field != tc.field {
					t.Errorf("error names line %d field %q, want line %d field %q: %v", le.Line, le.Field, tc.line, tc.field, err)
				}
			case errors.As(err, &torn):
				if torn.Line != tc.line {
					t.Errorf("torn line %d, want %d", torn.Line, tc.line)
				}
			default:
				t.Fatalf("error %T does not name a line: %v", err, err)
			}
			if !strings.Contains(err.Error(), "gen.jsonl:") {
				t.Errorf("error does not name the file: %v", err)
			}
			if n != tc.rowsRead {
				t.Errorf("%d rows read before the error, want %d", n, tc.rowsRead)
			}
		})
	}
}

func TestReaderAcceptsIntegerBytes(t *testing.T) {
	good := goodRecord(t, 1)
	data := editLine(t, good, 2, func(o map[string]any) {
		o["output"].([]any)[0].(map[string]any)["bytes"] = []int{0xe2, 0x96, 0x81}
	})
	_, err := readAllBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := NewReader(bytes.NewReader(data), "")
	row, _ := rd.Next()
	if got := string(row.Output[0].Bytes); got != "\u2581" {
		t.Errorf("bytes %q, want the three bytes of U+2581", got)
	}
	bad := editLine(t, good, 2, func(o map[string]any) { o["output"].([]any)[0].(map[string]any)["bytes"] = []int{256} })
	if _, err := readAllBytes(bad); !errors.Is(err, ErrBadRow) {
		t.Errorf("byte 256 accepted: %v", err)
	}
}

func TestVerifySum(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "generations.jsonl")
	data := goodRecord(t, 3)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := SumFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifySum(path, sum); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"edited", bytes.Replace(data, []byte(`"t1"`), []byte(`"t2"`), 1), "4 complete lines"},
		{"truncated at a line", data[:bytes.LastIndexByte(data[:len(data)-1], '\n')+1], "3 complete lines"},
		{"torn", data[:len(data)-5], "torn line 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			err := VerifySum(path, sum)
			if !errors.Is(err, ErrSumMismatch) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err %v, want ErrSumMismatch naming %s and %q", err, path, tc.want)
			}
		})
	}
	if err := VerifySum(path, "abc"); err == nil || errors.Is(err, ErrSumMismatch) {
		t.Errorf("malformed expected sum: %v", err)
	}
}

func TestSalvageCleanRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	data := goodRecord(t, 2)
	os.WriteFile(path, data, 0o644)
	torn, err := Salvage(path)
	if err != nil || torn != nil {
		t.Fatalf("salvage of a clean record: torn %v err %v", torn, err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, data) {
		t.Error("salvage changed a clean record")
	}
}

func TestStat(t *testing.T) {
	m := fakeModel{salt: "smol", vocab: 40}
	rows := genuineRows(m, 5)
	rows[2].Output[0] = Step{Text: rows[2].Output[0].Text}
	rows[2].LogprobsMissingSteps = 1
	rows[4].Role = RoleJudge
	path := recordWith(t, rows)
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append(data, []byte(`{"kind":"row","ro`)...), 0o644)
	st, err := Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 5 || st.MissingSteps != 1 || st.RowsWithGaps != 1 || st.ByRole[RoleJudge] != 1 || st.ByRole[RoleCandidate] != 4 {
		t.Errorf("stats %+v", st)
	}
	if st.Torn == nil || st.Torn.Line != 7 {
		t.Fatalf("torn tail not reported: %+v", st.Torn)
	}
	var b bytes.Buffer
	st.WriteText(&b)
	for _, want := range []string{"no log-prob for 1 tokens", "torn last line", st.SHA256} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
