package studies

import "strings"

// FirstLine keeps a runtime's error to one short line for tables and receipts.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return Clip(s, 160)
}

// Clip keeps a message readable in a table or a problem line.
func Clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// EstimatedWatts is the draw assumed for the energy estimate on a machine
// with no readable power counter; every figure built on it says "estimate".
const EstimatedWatts = 35.0
