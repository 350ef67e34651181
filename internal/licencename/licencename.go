// Package licencename says which names a licence entry goes by in a
// reviewer's licence line: the one rule, shared by studies (which checks
// the line) and api's light client (which prints the names a reviewer may
// use) without either importing the other. It reads no registry.
package licencename

import "strings"

// Of lists the names that refer to an entry: its id, its licence as written
// ("Gemma Terms of Use (last modified 2025-03-24)"), and that licence
// without a trailing note in parentheses ("Gemma Terms of Use").
func Of(entryID, licence string) []string {
	names := []string{entryID}
	if l := strings.TrimSpace(licence); l != "" {
		names = append(names, l)
		if i := strings.Index(l, " ("); i > 0 && strings.HasSuffix(l, ")") {
			names = append(names, strings.TrimSpace(l[:i]))
		}
	}
	return names
}
