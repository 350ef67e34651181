package tasks

import (
	"fmt"
	"strings"
)

// DuplicateTaskError names every pair of tasks in a bank that say the same
// thing: the same prompt and files once case, punctuation and spacing are
// set aside (the normalization `rig tasks lint` uses). Such a pair is one
// case counted twice, so the audit and the freeze refuse the bank. Two tasks
// with the same id never get this far: ParseBank refuses them by line.
type DuplicateTaskError struct {
	File  string
	Pairs []Pair
	lines map[string]int
}

func (e *DuplicateTaskError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d exact duplicate task pair(s), each one case counted twice (remove or reword one task of each pair, bump bank_version and audit again)", e.File, len(e.Pairs))
	for _, p := range e.Pairs {
		fmt.Fprintf(&b, "\n  task %q (line %d) has the same prompt as task %q (line %d)", p.B, e.lines[p.B], p.A, e.lines[p.A])
	}
	return b.String()
}

func (e *DuplicateTaskError) Unwrap() error { return ErrDuplicateTask }

// Duplicates returns the bank's exact duplicates (the same normalized text)
// and its near duplicates (word-shingle Jaccard at or above the lint's
// threshold, NearMethod), both in bank order: the lists `rig tasks lint`
// prints.
func Duplicates(b *Bank) (exact, near []Pair) { return duplicates(b.Tasks) }

// NearMethod says how near duplicates are found, for a reader of the list.
func NearMethod() string {
	return fmt.Sprintf("word %d-gram Jaccard >= %.2f", lintShingle, lintThreshold)
}

// CheckDuplicates returns a *DuplicateTaskError naming both tasks of every
// exact duplicate pair, or nil.
func CheckDuplicates(b *Bank) error {
	exact, _ := Duplicates(b)
	return duplicateError(b, exact)
}

func duplicateError(b *Bank, exact []Pair) error {
	if len(exact) == 0 {
		return nil
	}
	lines := make(map[string]int, 2*len(exact))
	for _, t := range b.Tasks {
		lines[t.ID] = t.line
	}
	return &DuplicateTaskError{File: b.File, Pairs: exact, lines: lines}
}
