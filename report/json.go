package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes d as indented JSON, the machine-readable twin of the
// HTML report.
func WriteJSON(w io.Writer, d Data) error {
	if err := d.Validate(); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Model outputs stay readable in the file; the HTML report is where
	// escaping for a browser matters.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("report: write JSON: %w", err)
	}
	return nil
}
