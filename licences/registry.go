package licences

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"rig/internal/jsonerr"
	"rig/internal/sizecap"
	"rig/internal/textcheck"
)

// SchemaVersion is the registry file format this package reads and writes.
const SchemaVersion = 1

// DateLayout is the only form date_read may take, so dates sort and compare as
// text and nobody has to guess between day-first and month-first.
const DateLayout = "2006-01-02"

// now is the clock date_read is checked against; tests replace it.
var now = time.Now

// Kind says what sort of thing an entry covers.
type Kind string

// The kinds an entry may have.
const (
	KindModel   Kind = "model"
	KindRuntime Kind = "runtime"
	KindTool    Kind = "tool"
	KindDataset Kind = "dataset"
	KindService Kind = "service"
	KindGrader  Kind = "grader"
	KindJudge   Kind = "judge"
)

// Kinds lists every valid Kind in the order the docs give them.
func Kinds() []Kind {
	return []Kind{KindModel, KindRuntime, KindTool, KindDataset, KindService, KindGrader, KindJudge}
}

// Use is what a design does with an item.
type Use string

// The uses a registry entry can rule on.
const (
	UseInference         Use = "inference"
	UseEvaluation        Use = "evaluation"
	UseGrading           Use = "grading"
	UseFineTuning        Use = "fine_tuning"
	UseTrainingOnOutputs Use = "training_on_outputs"
	UseDistillation      Use = "distillation"
	UseCompetingModels   Use = "competing_models"
	UseRedistribution    Use = "redistribution"
	UseHostedService     Use = "hosted_service"
	UseCommercial        Use = "commercial_use"
)

// Uses lists every valid Use.
func Uses() []Use {
	return []Use{UseInference, UseEvaluation, UseGrading, UseFineTuning, UseTrainingOnOutputs,
		UseDistillation, UseCompetingModels, UseRedistribution, UseHostedService, UseCommercial}
}

// CommonlyBanned reports whether providers commonly ban the use. Such a use is
// never allowed by default: the entry must carry an explicit reading of the
// clause, because Stage 1's training data had to be regenerated when three
// services' terms turned out to bar training on their outputs.
func (u Use) CommonlyBanned() bool {
	switch u {
	case UseTrainingOnOutputs, UseDistillation, UseCompetingModels:
		return true
	}
	return false
}

// Valid reports whether u is one of Uses().
func (u Use) Valid() bool {
	for _, v := range Uses() {
		if u == v {
			return true
		}
	}
	return false
}

// Valid reports whether k is one of Kinds().
func (k Kind) Valid() bool {
	for _, v := range Kinds() {
		if k == v {
			return true
		}
	}
	return false
}

// Decision is the verdict an entry gives a use.
type Decision string

// The three verdicts. Restricted means allowed only under the conditions the
// reading states (a notice to carry, a policy to follow); it does not block, but
// the check prints it so the conditions are seen.
const (
	Allowed    Decision = "allowed"
	Banned     Decision = "banned"
	Restricted Decision = "restricted"
)

// Verdict is one use's ruling with the reading of the clause behind it.
type Verdict struct {
	Verdict Decision `json:"verdict"`
	Reading string   `json:"reading"`
	// Clause cites the section this reading rests on when it differs from the
	// entry's main clause.
	Clause string `json:"clause,omitempty"`
}

// Entry is one row of the registry: one item, the page its terms were read
// from, the clause, the date, and a verdict per use.
type Entry struct {
	ID         string          `json:"id"`
	Item       string          `json:"item"`
	Kind       Kind            `json:"kind"`
	Licence    string          `json:"licence"`
	SourcePage string          `json:"source_page"`
	Clause     string          `json:"clause"`
	DateRead   string          `json:"date_read"`
	Verdicts   map[Use]Verdict `json:"verdicts"`
}

// Registry is one parsed registry file: the studio's own, or the one bundled
// with rig.
type Registry struct {
	SchemaVersion int     `json:"schema_version"`
	Entries       []Entry `json:"entries"`
	// File is the registry as its messages and verdict lines name it: the
	// path it was read from, or BundledFile. It is not part of the file.
	File string `json:"-"`
}

// Lookup returns the entry with the given id.
func (r *Registry) Lookup(id string) (Entry, bool) {
	for _, e := range r.Entries {
		if e.ID == id {
			return e, true
		}
	}
	return Entry{}, false
}

// Marshal writes the registry in the file format, indented, with a trailing
// newline, so a hand edit and a rewrite diff cleanly.
func (r *Registry) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

//go:embed registry.json
var bundledRegistry []byte

// BundledFile names the registry compiled into rig in messages and verdict
// lines. It is not a path a user can edit: a studio adds entries to its own
// registry file instead (see Set).
const BundledFile = "licences/registry.json (bundled with rig)"

// Bundled parses the starting registry shipped with rig (licences/registry.json
// as built into the binary).
func Bundled() (*Registry, error) {
	return ParseRegistry(BundledFile, bundledRegistry)
}

// BundledSHA256 is the hex SHA-256 of the bundled registry's bytes, so a
// study that used a bundled entry notices a rig rebuilt with other terms.
func BundledSHA256() string { return sha256Hex(bundledRegistry) }

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// RegistryCap is the most bytes a licence registry may hold. The bundled
// registry is about 23 KiB for a dozen entries; 4 MiB is some thousands of
// entries, and a file past it is refused before it is parsed.
var RegistryCap = sizecap.Cap{
	What:  "licence registry",
	Limit: 4 << 20,
	Fix:   "a registry holds one short entry per model, tool and data set: name the registry file meant, or split it",
}

// LoadRegistry reads and parses a registry file.
func LoadRegistry(path string) (*Registry, error) {
	reg, _, err := loadRegistry(os.Open, path)
	return reg, err
}

// loadRegistry also returns the hash of the very bytes it parsed, so the hash
// recorded for a study is the hash of the registry it was checked against.
func loadRegistry(open func(string) (*os.File, error), path string) (*Registry, string, error) {
	data, err := readRegistry(open, path)
	if errors.Is(err, sizecap.ErrTooLarge) {
		return nil, "", err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("licence registry %s: %w (give the path of an existing registry file)", path, err)
	}
	if err != nil {
		// A refusal to read it (the daemon's, on a caller's behalf) carries
		// its own fix.
		return nil, "", fmt.Errorf("licence registry %s: %w", path, err)
	}
	reg, err := ParseRegistry(path, data)
	if err != nil {
		return nil, "", err
	}
	return reg, sha256Hex(data), nil
}

// FileSHA256 is the hex SHA-256 of a registry file as it is on disk now.
func FileSHA256(path string) (string, error) { return FileSHA256With(os.Open, path) }

// FileSHA256With is FileSHA256 opening the file with open (see OpenSetWith).
func FileSHA256With(open func(string) (*os.File, error), path string) (string, error) {
	data, err := readRegistry(open, path)
	if errors.Is(err, sizecap.ErrTooLarge) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("licence registry %s: %w", path, err)
	}
	return sha256Hex(data), nil
}

// readRegistry is RegistryCap.ReadFile opening the file with open.
func readRegistry(open func(string) (*os.File, error), path string) ([]byte, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := RegistryCap.Check(f, path); err != nil {
		return nil, err
	}
	return RegistryCap.Read(f, path)
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// ParseRegistry parses a registry strictly: unknown fields, missing fields,
// unknown kinds, uses or verdicts, bad dates, duplicate ids and trailing data
// are errors that name the file, the field and the fix. Bytes that are not
// UTF-8 are refused first, naming the line and the offset (errors.Is
// textcheck.ErrInvalidUTF8). file is only used in messages.
func ParseRegistry(file string, data []byte) (*Registry, error) {
	var ue *textcheck.Error
	if errors.As(textcheck.UTF8(file, data), &ue) {
		return nil, &ParseError{File: file, Msg: fmt.Sprintf("line %d: %s", ue.Line, ue.Reason()), Err: ue}
	}
	p := parser{file: file}
	top, err := p.object("", data, []string{"schema_version", "entries"}, []string{"schema_version", "entries"})
	if err != nil {
		return nil, err
	}
	reg := &Registry{Entries: []Entry{}, File: file}
	if err := json.Unmarshal(top["schema_version"], &reg.SchemaVersion); err != nil {
		return nil, p.errf("schema_version", "must be an integer", "write \"schema_version\": %d", SchemaVersion)
	}
	if reg.SchemaVersion != SchemaVersion {
		return nil, p.errf("schema_version", fmt.Sprintf("version %d is not known", reg.SchemaVersion),
			"this rig reads version %d; upgrade rig or rewrite the file", SchemaVersion)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(top["entries"], &raws); err != nil || raws == nil {
		return nil, p.errf("entries", "must be an array of entries", "write \"entries\": [ {\"id\": ...}, ... ]")
	}
	seen := map[string]int{}
	for i, raw := range raws {
		e, err := p.entry(fmt.Sprintf("entries[%d]", i), raw)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[e.ID]; dup {
			return nil, p.errf(fmt.Sprintf("entries[%d].id", i), fmt.Sprintf("%q is already the id of entries[%d]", e.ID, j),
				"ids are unique; merge the two entries or rename one")
		}
		seen[e.ID] = i
		reg.Entries = append(reg.Entries, e)
	}
	return reg, nil
}

type parser struct{ file string }

func (p parser) errf(field, msg, fix string, args ...any) *ParseError {
	return &ParseError{File: p.file, Field: field, Msg: msg, Fix: fmt.Sprintf(fix, args...)}
}

// join is the path of key under path; the key is the file's own text and
// shows only as jsonerr.Span allows.
func join(path, key string) string {
	key = jsonerr.Span(key)
	if path == "" {
		return key
	}
	return path + "." + key
}

// object decodes one JSON object, refusing unknown keys, missing required keys,
// duplicate keys and trailing data, and naming the offending key.
func (p parser) object(path string, data []byte, known, required []string) (map[string]json.RawMessage, error) {
	where := path
	if where == "" {
		where = "(top level)"
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, p.errf(where, "is not valid JSON: "+jsonerr.Message(err), "fix the JSON syntax")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, p.errf(where, "must be a JSON object", "write { ... }")
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, p.errf(where, "is not valid JSON: "+jsonerr.Message(err), "fix the JSON syntax")
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, p.errf(join(path, key), "is not valid JSON: "+jsonerr.Message(err), "fix the JSON syntax")
		}
		if !contains(known, key) {
			if strings.HasSuffix(path, ".verdicts") {
				return nil, p.errf(join(path, key), "is not a use this registry knows", "use one of %s", strings.Join(known, ", "))
			}
			return nil, p.errf(join(path, key), "unknown field", "known fields here: %s", strings.Join(known, ", "))
		}
		if _, dup := m[key]; dup {
			return nil, p.errf(join(path, key), "appears twice", "keep one; JSON readers disagree on which one wins")
		}
		m[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, p.errf(where, "is not valid JSON: "+jsonerr.Message(err), "fix the JSON syntax")
	}
	if path == "" {
		if _, err := dec.Token(); err == nil {
			return nil, p.errf(where, "has data after the closing brace", "remove everything after the registry object")
		} else if !errors.Is(err, io.EOF) {
			return nil, p.errf(where, "has data after the closing brace: "+err.Error(), "remove everything after the registry object")
		}
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			return nil, p.errf(join(path, k), "is missing", "add it; every entry records %s", strings.Join(required, ", "))
		}
	}
	return m, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (p parser) text(path string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", p.errf(path, "must be a string", "write it in double quotes")
	}
	if strings.TrimSpace(s) == "" {
		return "", p.errf(path, "is empty", "fill it in from the terms you read")
	}
	return s, nil
}

var entryFields = []string{"id", "item", "kind", "licence", "source_page", "clause", "date_read", "verdicts"}

func (p parser) entry(path string, raw json.RawMessage) (Entry, error) {
	m, err := p.object(path, raw, entryFields, entryFields)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	fields := []struct {
		key string
		dst *string
	}{{"id", &e.ID}, {"item", &e.Item}, {"licence", &e.Licence}, {"source_page", &e.SourcePage}, {"clause", &e.Clause}, {"date_read", &e.DateRead}}
	for _, f := range fields {
		s, err := p.text(join(path, f.key), m[f.key])
		if err != nil {
			return Entry{}, err
		}
		*f.dst = s
	}
	if !idPattern.MatchString(e.ID) {
		return Entry{}, p.errf(join(path, "id"), fmt.Sprintf("%q is not a valid id", e.ID),
			"use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, e.g. \"smollm2-135m-instruct\"")
	}
	read, err := time.Parse(DateLayout, e.DateRead)
	if err != nil {
		return Entry{}, p.errf(join(path, "date_read"), fmt.Sprintf("%q is not a date", e.DateRead),
			"write the day you read the terms as YYYY-MM-DD, e.g. \"2026-11-30\"")
	}
	// A day of slack covers time zones: the reader's today may be the UTC
	// tomorrow.
	if today := now().UTC(); read.After(today.Truncate(24*time.Hour).AddDate(0, 0, 1)) {
		return Entry{}, p.errf(join(path, "date_read"), fmt.Sprintf("entry %q: %s is in the future (today is %s)", e.ID, e.DateRead, today.Format(DateLayout)),
			"write the day you actually read the terms, today or earlier, as YYYY-MM-DD; a reading cannot be dated ahead")
	}
	kind, err := p.text(join(path, "kind"), m["kind"])
	if err != nil {
		return Entry{}, err
	}
	e.Kind = Kind(kind)
	if !e.Kind.Valid() {
		return Entry{}, p.errf(join(path, "kind"), fmt.Sprintf("%q is not a kind", kind), "use one of %s", listKinds())
	}
	vm, err := p.object(join(path, "verdicts"), m["verdicts"], useNames(), nil)
	if err != nil {
		return Entry{}, err
	}
	if len(vm) == 0 {
		return Entry{}, p.errf(join(path, "verdicts"), "is empty",
			"record a verdict for at least the uses a design makes of it (inference, evaluation)")
	}
	e.Verdicts = map[Use]Verdict{}
	keys := make([]string, 0, len(vm))
	for k := range vm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := p.verdict(join(join(path, "verdicts"), k), vm[k])
		if err != nil {
			return Entry{}, err
		}
		e.Verdicts[Use(k)] = v
	}
	return e, nil
}

func (p parser) verdict(path string, raw json.RawMessage) (Verdict, error) {
	m, err := p.object(path, raw, []string{"verdict", "reading", "clause"}, []string{"verdict", "reading"})
	if err != nil {
		return Verdict{}, err
	}
	var v Verdict
	d, err := p.text(join(path, "verdict"), m["verdict"])
	if err != nil {
		return Verdict{}, err
	}
	v.Verdict = Decision(d)
	switch v.Verdict {
	case Allowed, Banned, Restricted:
	default:
		return Verdict{}, p.errf(join(path, "verdict"), fmt.Sprintf("%q is not a verdict", d), "use allowed, banned or restricted")
	}
	if v.Reading, err = p.text(join(path, "reading"), m["reading"]); err != nil {
		return Verdict{}, p.errf(join(path, "reading"), "is missing or empty",
			"write which way the clause reads for this use, in your words, after reading the terms at the source")
	}
	if c, ok := m["clause"]; ok {
		if v.Clause, err = p.text(join(path, "clause"), c); err != nil {
			return Verdict{}, err
		}
	}
	return v, nil
}

func useNames() []string {
	out := []string{}
	for _, u := range Uses() {
		out = append(out, string(u))
	}
	return out
}

func listKinds() string {
	out := []string{}
	for _, k := range Kinds() {
		out = append(out, string(k))
	}
	return strings.Join(out, ", ")
}
