package layout

import (
	"errors"
	"fmt"
	"regexp"
)

// ErrInvalidName means a name from outside (a request, a URL, a workflow's
// input) breaks the rule for its kind of name; the daemon answers it with
// the wire code invalid_name.
var ErrInvalidName = errors.New("invalid name")

// The rules. StudyNameRule is a design's "name" (studies' validation uses
// this same pattern): lowercase letters, digits, '.', '-' and '_', starting
// with a letter or a digit, so no name is "." or "..", holds a slash or
// starts like an option. An execution id is what the daemon numbers
// (exec-1, exec-2, …); a proposal id is its study's name and 12 hex digits
// of the comparison it rests on.
const (
	StudyNameRule   = `^` + studyNameBody + `$`
	ExecutionIDRule = `^exec-[1-9][0-9]{0,8}$`
	ProposalIDRule  = `^` + studyNameBody + `-[0-9a-f]{12}$`

	studyNameBody = `[a-z0-9][a-z0-9._-]{0,63}`
)

var (
	studyNameRE   = regexp.MustCompile(StudyNameRule)
	executionIDRE = regexp.MustCompile(ExecutionIDRule)
	proposalIDRE  = regexp.MustCompile(ProposalIDRule)
)

// NameError is a refused name: which kind, the name as given, and the rule
// it breaks.
type NameError struct {
	Kind string // "study name", "execution id", "proposal id"
	Name string
	Rule string
	Hint string
}

func (e *NameError) Error() string {
	name := e.Name
	if len(name) > 80 {
		name = name[:80] + "…"
	}
	return fmt.Sprintf("%s %q is not a name: %s (the rule is %s; a %s names a folder, never a path)", e.Kind, name, e.Hint, e.Rule, e.Kind)
}

// Is makes errors.Is(err, ErrInvalidName) hold.
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// CheckStudyName refuses a study name that breaks StudyNameRule.
func CheckStudyName(name string) error {
	if studyNameRE.MatchString(name) {
		return nil
	}
	return &NameError{Kind: "study name", Name: name, Rule: StudyNameRule,
		Hint: "use lowercase letters, digits, '.', '-' or '_', starting with a letter or digit, at most 64 (rig study list shows the registered ones)"}
}

// CheckExecutionID refuses an execution id that breaks ExecutionIDRule.
func CheckExecutionID(id string) error {
	if executionIDRE.MatchString(id) {
		return nil
	}
	return &NameError{Kind: "execution id", Name: id, Rule: ExecutionIDRule,
		Hint: "give an id as rig study status lists it, e.g. exec-1"}
}

// SpoolEntryRule is a spool entry's name: KEY#ATTEMPT.WORKER with the key
// and the worker path-escaped, so one path element of printable ASCII with
// no slash or backslash, not starting with '.', at most 255 bytes.
const SpoolEntryRule = `^[!-\-0-\[\]-~][!-.0-\[\]-~]{0,254}$`

var spoolEntryRE = regexp.MustCompile(SpoolEntryRule)

// CheckSpoolEntry refuses a spool entry name that breaks SpoolEntryRule.
func CheckSpoolEntry(name string) error {
	if spoolEntryRE.MatchString(name) {
		return nil
	}
	return &NameError{Kind: "spool entry", Name: name, Rule: SpoolEntryRule,
		Hint: "an entry is named KEY#ATTEMPT.WORKER by the worker that wrote it, one path element"}
}

// CheckProposalID refuses a proposal id that breaks ProposalIDRule.
func CheckProposalID(id string) error {
	if proposalIDRE.MatchString(id) {
		return nil
	}
	return &NameError{Kind: "proposal id", Name: id, Rule: ProposalIDRule,
		Hint: "give an id as rig proposal list shows it: the study's name, '-' and 12 hex digits"}
}
