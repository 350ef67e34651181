package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
)

func TestExportJSONL(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	fill(t, s)
	var buf bytes.Buffer
	if err := s.Export(ctx, &buf, JSONL); err != nil {
		t.Fatal(err)
	}
	want, err := s.Receipts(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	var got []Receipt
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("row %q: %v", sc.Text(), err)
		}
		if row["schema_version"] != float64(SchemaVersion) {
			t.Errorf("row lacks schema_version: %s", sc.Text())
		}
		var r Receipt
		if err := strictUnmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exported receipts differ from the store:\n%+v\n%+v", got, want)
	}
}

func TestExportCSV(t *testing.T) {
	ctx := context.Background()
	s, _ := openFrozen(t)
	fill(t, s)
	var buf bytes.Buffer
	if err := s.Export(ctx, &buf, CSV); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want a header and 5 receipts", len(rows))
	}
	if !reflect.DeepEqual(rows[0], Columns()) {
		t.Errorf("header = %v", rows[0])
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	want, _ := s.Receipts(ctx, "")
	for i, row := range rows[1:] {
		if len(row) != len(Columns()) {
			t.Fatalf("row %d has %d fields", i, len(row))
		}
		if row[col["schema_version"]] != strconv.Itoa(SchemaVersion) {
			t.Errorf("row %d schema_version = %q", i, row[col["schema_version"]])
		}
		r := want[i]
		if row[col["task_id"]] != r.TaskID || row[col["outcome"]] != string(r.Outcome) || row[col["attempt"]] != strconv.Itoa(r.Attempt) {
			t.Errorf("row %d = %v, want %+v", i, row, r)
		}
		var pins map[string]string
		if err := json.Unmarshal([]byte(row[col["pins"]]), &pins); err != nil || !reflect.DeepEqual(pins, r.Pins) {
			t.Errorf("row %d pins = %q", i, row[col["pins"]])
		}
		if (r.Grade != nil) != (row[col["graded"]] == "true") {
			t.Errorf("row %d graded = %q with grade %+v", i, row[col["graded"]], r.Grade)
		}
	}
}

func TestExportFormat(t *testing.T) {
	s, _ := openFrozen(t)
	if err := s.Export(context.Background(), &bytes.Buffer{}, "xml"); !errors.Is(err, ErrInvalid) {
		t.Errorf("xml: err = %v", err)
	}
	for in, want := range map[string]Format{"jsonl": JSONL, "csv": CSV} {
		if got, err := ParseFormat(in); got != want || err != nil {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("JSON"); err == nil {
		t.Error("ParseFormat(JSON) accepted")
	}
}
