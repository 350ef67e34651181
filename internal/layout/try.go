package layout

import (
	"path/filepath"
	"regexp"
)

// TryIDRule is the shape of a try's id (rig try): "try-" and 12 hex digits.
const TryIDRule = `^try-[0-9a-f]{12}$`

var tryIDRE = regexp.MustCompile(TryIDRule)

// CheckTryID refuses a try id that breaks TryIDRule.
func CheckTryID(id string) error {
	if tryIDRE.MatchString(id) {
		return nil
	}
	return &NameError{Kind: "try id", Name: id, Rule: TryIDRule, Hint: "give an id as rig try list shows it: 'try-' and 12 hex digits"}
}

// Tries is the folder of every kept try:
//
//	HOME/tries/ID/try.json                 the try's record (what was tried, what it gave)
//	HOME/tries/ID/generations-ARM.jsonl    its generation records
//	HOME/tries/runtimes/                   the warm runtimes' own folders (not a try's)
func (h Home) Tries() string { return filepath.Join(string(h), "tries") }

// TryRuntimes is the folder the warm runtimes between tries live in.
func (h Home) TryRuntimes() string { return filepath.Join(h.Tries(), "runtimes") }

// Try is try id's folder; the id is checked first (CheckTryID).
func (h Home) Try(id string) (Records, error) {
	if err := CheckTryID(id); err != nil {
		return "", err
	}
	return Records(filepath.Join(h.Tries(), id)), nil
}

// TryRecord is a try folder's record.
func (r Records) TryRecord() string { return filepath.Join(string(r), "try.json") }
