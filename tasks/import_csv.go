package tasks

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// csv reads a CSV file whose first row names its columns; the options name
// the prompt, target and (optionally) id columns. A target cell is one
// answer: splitting it on a separator would break answers that hold one.
func (im *importer) csv(data []byte) []importRow {
	o := im.o
	if o.PromptField == "" || o.TargetField == "" {
		im.fail(nil, "columns", "--prompt-field and --target-field are required for CSV", "name the columns holding the prompt and the answer, e.g. --prompt-field question --target-field answer")
		return nil
	}
	cr := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\ufeff"))))
	head, err := cr.Read()
	if err != nil {
		im.fail(nil, "header", "the first row must name the columns: "+csvMessage(err), "start the file with a row of column names")
		return nil
	}
	col := map[string]int{}
	for i, name := range head {
		col[strings.TrimSpace(name)] = i
	}
	for _, named := range []struct{ flag, name string }{{"prompt-field", o.PromptField}, {"target-field", o.TargetField}, {"id-field", o.IDField}, {"template-field", o.TemplateField}, {"difficulty-field", o.DifficultyField}, {"holdout-field", o.HoldoutField}} {
		if _, ok := col[named.name]; named.name != "" && !ok {
			im.fail(&importRow{line: 1}, named.name, fmt.Sprintf("no such column (named by --%s)", named.flag), "the columns are: "+strings.Join(head, ", "))
		}
	}
	if im.errs.Count > 0 {
		return nil
	}
	var rows []importRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			line := 0
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.StartLine
			}
			im.fail(&importRow{line: line}, "row", csvMessage(err), "quote cells holding commas, quotes or newlines; every row has as many cells as the header")
			if !errors.As(err, &pe) || pe.Err != csv.ErrFieldCount {
				break // the reader cannot resynchronise after a quoting error
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		cell := func(name string) (string, bool) {
			i, ok := col[name]
			if !ok || i >= len(rec) {
				return "", false
			}
			return rec[i], true
		}
		r := importRow{line: line, prompt: rec[col[o.PromptField]], field: cell}
		target := rec[col[o.TargetField]]
		if strings.TrimSpace(target) == "" {
			im.fail(&r, o.TargetField, "is empty", "every row needs its answer")
			continue
		}
		if r.grader, r.key, err = o.answerKey([]string{target}); err != nil {
			im.fail(&r, o.TargetField, err.Error(), "")
			continue
		}
		rows = append(rows, r)
	}
	return rows
}

// csvMessage is a CSV reader's error without its own "record on line N"
// prefix, which the problem's place already says.
func csvMessage(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	if errors.Is(err, io.EOF) {
		return "the file is empty"
	}
	return err.Error()
}
