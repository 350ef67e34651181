package genrecord

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Stats describes a whole record after a full read: what a validation run
// checks and what a receipt quotes.
type Stats struct {
	Path         string         `json:"path"`
	SHA256       string         `json:"sha256"`
	Pins         Pins           `json:"pins"`
	Rows         int            `json:"rows"`
	Steps        int            `json:"steps"`
	MissingSteps int            `json:"logprobs_missing_steps"` // tokens the runtime gave no log-prob for
	RowsWithGaps int            `json:"rows_with_gaps"`
	ByRole       map[Role]int   `json:"by_role"`
	ByArm        map[string]int `json:"by_arm"`
	Torn         *TornLineError `json:"torn,omitempty"`
}

// Stat reads a record completely. A torn last line is reported in Stats.Torn
// (the complete rows are still counted); any other bad line is an error.
func Stat(path string) (Stats, error) {
	st := Stats{Path: path, ByRole: map[Role]int{}, ByArm: map[string]int{}}
	sum, err := SumFile(path)
	if err != nil {
		return st, err
	}
	st.SHA256 = sum
	rd, err := OpenReader(path)
	if err != nil {
		return st, err
	}
	defer rd.Close()
	st.Pins = rd.Header().Pins
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		var torn *TornLineError
		if errors.As(err, &torn) {
			st.Torn = torn
			return st, nil
		}
		if err != nil {
			return st, err
		}
		st.Rows++
		st.Steps += len(row.Output)
		st.MissingSteps += row.LogprobsMissingSteps
		if row.LogprobsMissingSteps > 0 {
			st.RowsWithGaps++
		}
		st.ByRole[row.Role]++
		st.ByArm[row.Arm]++
	}
}

// WriteText prints the stats, saying plainly when log-probs are missing.
func (s Stats) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: sha256 %s, %d rows, %d steps, model %s on %s %s\n", s.Path, s.SHA256, s.Rows, s.Steps, s.Pins.ModelName, s.Pins.Runtime, s.Pins.RuntimeVersion)
	roles := make([]string, 0, len(s.ByRole))
	for r, n := range s.ByRole {
		roles = append(roles, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(roles)
	fmt.Fprintf(&b, "  roles: %s\n", strings.Join(roles, ", "))
	if s.MissingSteps > 0 {
		fmt.Fprintf(&b, "  the runtime gave no log-prob for %d tokens in %d rows (recorded as gaps, not padded; replay leaves them unchecked)\n", s.MissingSteps, s.RowsWithGaps)
	}
	if s.Torn != nil {
		fmt.Fprintf(&b, "  warning: %v\n", s.Torn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
