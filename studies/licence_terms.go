package studies

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"rig/internal/jsonerr"
	"rig/internal/licencename"
	"rig/licences"
)

// LicenceTerm is one registry entry a study's items rest on, as a reviewer
// reads it before writing the review's licence line: the licence, where its
// terms were read, the clause, and what the entry allows per use, with the
// uses this study puts it to.
type LicenceTerm struct {
	EntryID    string `json:"entry_id"`
	Item       string `json:"item"`
	Licence    string `json:"licence"`
	SourcePage string `json:"source_page"`
	Clause     string `json:"clause"`
	DateRead   string `json:"date_read"`
	Registry   string `json:"registry"`
	// Allows is the entry's verdict per use, every use it rules on, sorted
	// by use: what the licence allows beyond this study too.
	Allows []LicenceAllow `json:"allows"`
	// Study is the uses this study puts the entry to, with the verdict.
	Study []LicenceAllow `json:"study"`
	// Restricted is true when any of the study's uses is restricted: the
	// terms a reviewer must read and the licence line must name.
	Restricted bool `json:"restricted"`
}

// LicenceAllow is one use and the entry's verdict on it.
type LicenceAllow struct {
	Use     string `json:"use"`
	Role    string `json:"role,omitempty"` // the study's item's role, for Study
	Verdict string `json:"verdict"`
	Reading string `json:"reading,omitempty"`
	Clause  string `json:"clause,omitempty"`
}

// LicenceTermsFor gathers the entries the study's items rest on, from the
// registry recorded at registration over the bundled one, in the order the
// items name them.
func LicenceTermsFor(items []Item, rec LicenceRecord) ([]LicenceTerm, error) {
	sl, err := OpenLicences(LicenceRegistryChoice{Path: rec.Registry, From: cmp.Or(rec.From, "the study's registration")})
	if err != nil {
		return nil, err
	}
	var terms []LicenceTerm
	at := map[string]int{}
	for _, l := range sl.Result(items).Lines {
		i, seen := at[l.EntryID]
		if !seen {
			e, reg, ok := sl.Set.Find(l.EntryID)
			if !ok {
				continue
			}
			t := LicenceTerm{EntryID: e.ID, Item: e.Item, Licence: e.Licence, SourcePage: e.SourcePage, Clause: e.Clause, DateRead: e.DateRead, Registry: reg.File}
			for use, v := range e.Verdicts {
				t.Allows = append(t.Allows, LicenceAllow{Use: string(use), Verdict: string(v.Verdict), Reading: v.Reading, Clause: v.Clause})
			}
			slices.SortFunc(t.Allows, func(a, b LicenceAllow) int { return strings.Compare(a.Use, b.Use) })
			i = len(terms)
			at[l.EntryID] = i
			terms = append(terms, t)
		}
		terms[i].Study = append(terms[i].Study, LicenceAllow{Use: string(l.Item.Use), Role: string(l.Item.Role), Verdict: string(l.Verdict), Reading: l.Reading, Clause: l.Clause})
		if l.Verdict == licences.Restricted {
			terms[i].Restricted = true
		}
	}
	return terms, nil
}

// Names is how a licence line may name the entry: its registry id, or its
// licence's name, with or without a trailing note in parentheses ("Gemma
// Terms of Use (last modified 2025-03-24)" is named by "Gemma Terms of Use").
func (t LicenceTerm) Names() []string {
	return licencename.Of(t.EntryID, t.Licence)
}

// named reports whether line names the entry, as a whole word (case aside):
// "MIT" in "submitted" does not count.
func (t LicenceTerm) named(line string) bool {
	line = strings.ToLower(line)
	for _, n := range t.Names() {
		n = strings.ToLower(n)
		for off := 0; ; {
			i := strings.Index(line[off:], n)
			if i < 0 {
				break
			}
			start, end := off+i, off+i+len(n)
			if !wordAt(line, start-1) && !wordAt(line, end) {
				return true
			}
			off = start + 1
		}
	}
	return false
}

func wordAt(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	r := rune(s[i])
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// CheckLicenceLine is what a passing review's licence line must say: the
// licence of every entry the study's uses are restricted by (its id or its
// licence's name), or, with nothing restricted, the licence of at least one
// of the design's items — the line is the reviewer's statement that they
// read the terms, and "all good" names none of them (issue 46: review asked
// for a licence and then accepted "all good"). A line that misses ("x (y)")
// is refused with ErrNoLicenceLine, listing what it may name. With no
// registry entry behind the items there is no licence to name: the
// lifecycle still refuses an empty or placeholder line.
func CheckLicenceLine(terms []LicenceTerm, line string) error {
	if len(terms) == 0 {
		return nil
	}
	var restricted, missing, nameable []string
	named := false
	for _, t := range terms {
		named = named || t.named(line)
		nameable = append(nameable, describeNames(t))
		if t.Restricted {
			restricted = append(restricted, t.EntryID)
			if !t.named(line) {
				missing = append(missing, describeNames(t))
			}
		}
	}
	if len(missing) > 0 {
		return &LicenceLineError{Msg: fmt.Sprintf("the licence line %s does not name the restricted licence of %s: a pass states that the reviewer read the restriction (rig study review lists its terms), e.g. %q",
			jsonerr.Quote(line), strings.Join(missing, " and "), "licences: "+strings.Join(restricted, ", ")+" restricted use read and accepted; the rest allowed")}
	}
	if len(restricted) == 0 && !named {
		return &LicenceLineError{Msg: fmt.Sprintf("the licence line %s names none of the design's licences: a pass states that the reviewer read their terms (rig study review lists them); name at least one of %s, e.g. %q",
			jsonerr.Quote(line), strings.Join(nameable, ", "), "licences: "+terms[0].EntryID+" and the rest read; no banned or restricted use")}
	}
	return nil
}

// LicenceLineError is a passing review's licence line that does not name a
// restricted licence; errors.Is(err, ErrNoLicenceLine) holds, so the wire
// code is the same as for a missing line.
type LicenceLineError struct{ Msg string }

func (e *LicenceLineError) Error() string        { return e.Msg }
func (e *LicenceLineError) Is(target error) bool { return target == ErrNoLicenceLine }

func describeNames(t LicenceTerm) string {
	names := t.Names()
	if len(names) == 1 {
		return t.EntryID
	}
	return fmt.Sprintf("%s (%q)", t.EntryID, names[len(names)-1])
}
