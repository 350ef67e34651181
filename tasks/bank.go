package tasks

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"rig/internal/jsonerr"
	"rig/internal/sizecap"
	"rig/internal/textcheck"
)

// SchemaVersion is the bank format this package reads and writes.
const SchemaVersion = 1

// Difficulty levels a task may carry; the lint reports the mix.
const (
	Easy   = "easy"
	Medium = "medium"
	Hard   = "hard"
)

// SourcePrivate marks a task written in-house; public benchmark tasks use
// "public-benchmark:NAME" and are only fit as a change detector.
const (
	SourcePrivate         = "private"
	sourcePublicBenchmark = "public-benchmark:"
)

// Header is the first line of a bank file.
type Header struct {
	SchemaVersion int    `json:"schema_version"`
	JobKind       string `json:"job_kind"`
	BankVersion   string `json:"bank_version"`
	Description   string `json:"description,omitempty"`
	// Completion, when set, is how the tasks are put to an arm whose
	// prompt_format is "completion" (a base model): see Completion.
	Completion *Completion `json:"completion,omitempty"`
	// Origin, set by `rig tasks import`, is the file the bank was
	// converted from and its sha256.
	Origin *Origin `json:"origin,omitempty"`
}

// Input is what a model or harness is given for one task. Code tasks carry a
// small repository (path → content) and the argv that runs its tests.
type Input struct {
	Prompt      string            `json:"prompt"`
	Files       map[string]string `json:"files,omitempty"`
	TestCommand []string          `json:"test_command,omitempty"`
}

// GraderRef names one registered grader at one version.
type GraderRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

func (g GraderRef) String() string { return fmt.Sprintf("%s@v%d", g.Name, g.Version) }

// Task is one line of a bank after the header. Key is decoded by the task's
// grader, which knows its shape.
type Task struct {
	ID         string          `json:"id"`
	JobKind    string          `json:"job_kind"`
	TemplateID string          `json:"template_id"`
	Difficulty string          `json:"difficulty"`
	Input      Input           `json:"input"`
	Key        json.RawMessage `json:"key"`
	Grader     GraderRef       `json:"grader"`
	Tags       []string        `json:"tags,omitempty"`
	Holdout    bool            `json:"holdout"`
	Source     string          `json:"source"`

	line int
}

// Line is the 1-based line of the task in its bank file (0 if built in code).
func (t Task) Line() int { return t.line }

// PublicBenchmark returns the benchmark name when the task comes from one.
func (t Task) PublicBenchmark() (string, bool) {
	name, ok := strings.CutPrefix(t.Source, sourcePublicBenchmark)
	return name, ok
}

// Bank is a parsed bank file with its content hash.
type Bank struct {
	File   string
	Header Header
	Tasks  []Task
	// Hash is the hex sha256 of the canonical bytes (see Canonical); it
	// ignores formatting and so changes only when content changes.
	Hash string
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// BankCap and BankLineCap bound a task bank before it is parsed: the whole
// file (its tasks are held in memory), and one line, which is one task. A
// line holds a prompt, and a prompt longer than the largest context rig
// accepts (studies.MaxContext, 2^20 tokens, a few MiB of text) can never be
// run; the bundled banks' longest line is under 2 KiB.
var (
	BankCap     = sizecap.Cap{What: "task bank", Limit: 64 << 20, Fix: "split the bank into several job kinds, or sample it with sample_tasks"}
	BankLineCap = sizecap.Cap{What: "task", Limit: 8 << 20, Fix: "a prompt over 8 MiB cannot fit any context rig runs: shorten it, or leave the task out"}
)

// LoadBank reads and parses a bank file.
func LoadBank(file string) (*Bank, error) { return LoadBankWith(os.Open, file) }

// LoadBankWith is LoadBank opening the file with open: a service reading a
// bank on someone's behalf passes an open that has their rights, and parses
// the very file it opened (peerfile.OpenAny).
func LoadBankWith(open func(string) (*os.File, error), file string) (*Bank, error) {
	f, err := open(file)
	if err != nil {
		return nil, fmt.Errorf("open bank: %w", err)
	}
	defer f.Close()
	if err := BankCap.Check(f, file); err != nil {
		return nil, err
	}
	return ParseBank(io.LimitReader(f, BankCap.Limit+1), file)
}

// ParseBank reads a bank strictly: bytes that are not UTF-8, unknown fields,
// malformed lines, missing required fields and duplicate ids are problems
// naming file:line and field. It reads the whole file and reports every
// problem at once (a *BankError, the first MaxReported of them shown), so
// one edit fixes them all; a bank with any problem is refused whole.
// errors.As finds the first problem's *ParseError in the error.
func ParseBank(r io.Reader, file string) (*Bank, error) {
	p := bankParser{b: &Bank{File: file}, errs: &BankError{File: file}, seen: map[string]int{}}
	br := bufio.NewReader(r)
	var offset int64
	for {
		raw, err := BankLineCap.ReadLine(br, file, p.lineNo+1)
		var tooLong *sizecap.Error
		if errors.As(err, &tooLong) {
			// The rest of the line was never read: nothing after it can be placed.
			p.errs.add(&ParseError{File: file, Line: p.lineNo + 1, Msg: fmt.Sprintf("the line is over rig's cap of %s for one task", sizecap.Bytes(BankLineCap.Limit)), Fix: BankLineCap.Fix, Err: err})
			return nil, p.errs
		}
		if offset+int64(len(raw)) > BankCap.Limit {
			p.errs.add(&ParseError{File: file, Line: p.lineNo + 1, Msg: fmt.Sprintf("the bank is over rig's cap of %s", sizecap.Bytes(BankCap.Limit)), Fix: BankCap.Fix, Err: &sizecap.Error{Path: file, What: BankCap.What, Size: offset + int64(len(raw)), Limit: BankCap.Limit, Fix: BankCap.Fix}})
			return nil, p.errs
		}
		if len(raw) > 0 {
			p.line(raw, offset)
			offset += int64(len(raw))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: read: %w", file, err)
		}
	}
	return p.finish()
}

// bankParser is ParseBank's state between lines.
type bankParser struct {
	b      *Bank
	errs   *BankError
	seen   map[string]int // task id -> line
	lineNo int
	// header is set once the first non-blank line was read; headerOK when
	// it was a valid header, so tasks are checked against its job kind.
	header, headerOK bool
	taskLines        int
}

// line reads one line of the file: the header, a task, or blank.
func (p *bankParser) line(raw []byte, offset int64) {
	p.lineNo++
	file := p.b.File
	var ue *textcheck.Error
	if errors.As(textcheck.UTF8At(file, raw, p.lineNo, offset), &ue) {
		p.errs.add(&ParseError{File: file, Line: p.lineNo, Msg: ue.Reason(), Err: ue})
		p.header = true
		return
	}
	line := bytes.TrimSpace(raw)
	switch {
	case len(line) == 0:
	case !p.header:
		p.header = true
		if !p.headerLine(line) {
			return
		}
		n := p.errs.Count
		p.b.Header.validate(file, p.lineNo, p.errs)
		p.headerOK = p.errs.Count == n
	default:
		p.task(line)
	}
}

// headerLine decodes the first line as the header. A line that is not a
// header says so before any field of it is judged: an unknown field
// "input" on line 1 hides that the header is missing. A first line that
// is a task (it has an id and no schema_version) is read as a task too,
// so every problem of the file is still reported.
func (p *bankParser) headerLine(line []byte) bool {
	file := p.b.File
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		p.errs.add(&ParseError{File: file, Line: p.lineNo, Field: "header", Msg: "the first line must be the bank's header; it is not a JSON object (" + jsonerr.Message(err) + ")", Fix: headerFix(nil), Err: err})
		return false
	}
	if _, ok := fields["schema_version"]; !ok {
		p.errs.add(&ParseError{File: file, Line: p.lineNo, Field: "header", Msg: "the first line must be the bank's header; it has no schema_version", Fix: headerFix(fields)})
		if _, task := fields["id"]; task {
			p.task(line)
		}
		return false
	}
	if err := decodeStrict(line, &p.b.Header); err != nil {
		p.errs.add(lineErr(file, p.lineNo, "header", err, headerFix(nil)))
		return false
	}
	return true
}

// headerFix says how to start a bank, and names the import that reads a
// file shaped like another tool's dataset.
func headerFix(fields map[string]json.RawMessage) string {
	fix := `start the file with {"schema_version":1,"job_kind":...,"bank_version":...}`
	has := func(k string) bool { _, ok := fields[k]; return ok }
	switch {
	case has("doc") && (has("doc_id") || has("target")):
		fix += "; an lm-eval samples file is converted with `rig tasks import FILE --from lm-eval`"
	case has("input") && !has("schema_version"):
		fix += "; an Inspect dataset is converted with `rig tasks import FILE --from inspect`"
	default:
		fix += "; another tool's dataset is converted with `rig tasks import FILE --from inspect|promptfoo|lm-eval|csv`"
	}
	return fix
}

// task reads one task line.
func (p *bankParser) task(line []byte) {
	file := p.b.File
	p.taskLines++
	var t Task
	if err := decodeStrict(line, &t); err != nil {
		p.errs.add(lineErr(file, p.lineNo, "task", err, "each line after the header is one task object"))
		return
	}
	t.line = p.lineNo
	t.validate(file, p.b.Header, p.headerOK, p.errs)
	if prev, dup := p.seen[t.ID]; dup {
		p.errs.add(&ParseError{File: file, Line: p.lineNo, Field: "id", Msg: fmt.Sprintf("duplicate task id %s (first on line %d)", jsonerr.Quote(t.ID), prev), Fix: "give every task a unique id"})
	} else {
		p.seen[t.ID] = p.lineNo
	}
	if p.errs.Count == 0 {
		p.b.Tasks = append(p.b.Tasks, t)
	}
}

// finish refuses a bank with any problem, or with no header or no task,
// and hashes the rest.
func (p *bankParser) finish() (*Bank, error) {
	file := p.b.File
	if !p.header {
		p.errs.add(&ParseError{File: file, Line: 1, Field: "header", Msg: "empty bank: the first line must be the bank's header", Fix: headerFix(nil)})
	} else if p.taskLines == 0 {
		p.errs.add(&ParseError{File: file, Line: p.lineNo, Field: "tasks", Msg: "bank has no tasks", Fix: "add at least one task line after the header"})
	}
	if p.errs.Count > 0 {
		return nil, p.errs
	}
	h, err := p.b.computeHash()
	if err != nil {
		return nil, fmt.Errorf("%s: hash: %w", file, err)
	}
	p.b.Hash = h
	return p.b, nil
}

func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

var unknownField = regexp.MustCompile(`unknown field "([^"]*)"`)

func lineErr(file string, line int, what string, err error, fix string) error {
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		if m[1] == "" {
			return &ParseError{File: file, Line: line, Field: what, Msg: `unknown field ""`, Fix: "remove it; the bank format is strict", Err: err}
		}
		return &ParseError{File: file, Line: line, Field: m[1], Msg: "unknown field", Fix: "remove it or check its spelling; the bank format is strict", Err: err}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// te.Type is a Go type ("tasks.Header"); say what JSON it takes.
		field := te.Field
		if field == "" {
			field = what // the line itself is a number, a string or a list
		}
		return &ParseError{File: file, Line: line, Field: field, Msg: fmt.Sprintf("has JSON %s, want %s", te.Value, jsonerr.Kind(te.Type.Kind())), Fix: "use the documented type; docs/tasks.md lists each field", Err: err}
	}
	return &ParseError{File: file, Line: line, Field: what, Msg: "malformed JSON: " + jsonerr.Message(err), Fix: fix, Err: err}
}

// validate adds every problem of the header to errs.
func (h Header) validate(file string, line int, errs *BankError) {
	fail := func(field, msg, fix string) {
		errs.add(&ParseError{File: file, Line: line, Field: field, Msg: msg, Fix: fix})
	}
	if h.SchemaVersion != SchemaVersion {
		fail("schema_version", fmt.Sprintf("is %d", h.SchemaVersion), fmt.Sprintf("this rig reads schema_version %d", SchemaVersion))
	}
	if h.JobKind == "" {
		fail("job_kind", "is empty", "name the job kind the bank is for")
	}
	if h.BankVersion == "" {
		fail("bank_version", "is empty", `set a version such as "1"; bump it on every edit`)
	}
	if h.Completion != nil {
		if err := h.Completion.validate(file, line); err != nil {
			errs.add(err)
		}
	}
	if h.Origin != nil {
		if err := h.Origin.validate(file, line); err != nil {
			errs.add(err)
		}
	}
}

// validate adds every problem of the task to errs; its job kind is held to
// the header's when the header was read (headerOK).
func (t Task) validate(file string, h Header, headerOK bool, errs *BankError) {
	fail := func(field, msg, fix string) {
		errs.add(&ParseError{File: file, Line: t.line, Field: field, Msg: msg, Fix: fix})
	}
	if !idPattern.MatchString(t.ID) {
		fail("id", jsonerr.Quote(t.ID)+" is not a valid id", "use letters, digits, '.', '_' or '-' (max 128)")
	}
	if headerOK && t.JobKind != h.JobKind {
		fail("job_kind", fmt.Sprintf("%s differs from the header's %s", jsonerr.Quote(t.JobKind), jsonerr.Quote(h.JobKind)), "one bank holds one job kind")
	}
	if t.TemplateID == "" {
		fail("template_id", "is empty", "name the template the task was written from; the lint counts templates")
	}
	if t.Difficulty != Easy && t.Difficulty != Medium && t.Difficulty != Hard {
		fail("difficulty", jsonerr.Quote(t.Difficulty), "use easy, medium or hard")
	}
	if strings.TrimSpace(t.Input.Prompt) == "" {
		fail("input.prompt", "is empty", "give the model something to do")
	}
	if len(bytes.TrimSpace(t.Key)) == 0 || string(bytes.TrimSpace(t.Key)) == "null" {
		fail("key", "is missing", "every task carries its key; keys are audited before any run")
	}
	if t.Grader.Name == "" {
		fail("grader.name", "is empty", "name a registered grader such as json or code")
	}
	if t.Grader.Version < 1 {
		fail("grader.version", fmt.Sprintf("is %d", t.Grader.Version), "grader versions start at 1")
	}
	if t.Source != SourcePrivate {
		if name, ok := t.PublicBenchmark(); !ok || name == "" {
			fail("source", jsonerr.Quote(t.Source), `use "private" or "public-benchmark:NAME"`)
		}
	}
	for _, p := range sortedFiles(t.Input.Files) {
		if err := checkRelPath(p); err != nil {
			fail("input.files", fmt.Sprintf("%s: %v", jsonerr.Quote(p), err), "use a clean relative path inside the repository")
		}
	}
	if len(t.Input.Files) > 0 && len(t.Input.TestCommand) == 0 {
		fail("input.test_command", "is empty", `give the argv that runs the tests, e.g. ["python3","-m","unittest","-q"]`)
	}
}

// sortedFiles lists a task's file paths in order, so its problems are
// reported the same way every time.
func sortedFiles(files map[string]string) []string {
	out := make([]string, 0, len(files))
	for p := range files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func checkRelPath(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." || strings.HasPrefix(p, ".git/") || p == ".git" || strings.ContainsRune(p, '\\') {
		return errors.New("not a clean relative path")
	}
	return nil
}

// Canonical returns the bytes the content hash is taken over: the header and
// every task re-encoded with sorted keys, one per line.
func (b *Bank) Canonical() ([]byte, error) {
	var buf bytes.Buffer
	if err := b.Encode(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Encode writes the bank in canonical form (header line, then tasks).
func (b *Bank) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	// Code lives in keys and files; keep "<" and "&" readable.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b.Header); err != nil {
		return err
	}
	for _, t := range b.Tasks {
		key, err := canonicalJSON(t.Key)
		if err != nil {
			return fmt.Errorf("task %s: key: %w", t.ID, err)
		}
		t.Key = key
		if err := enc.Encode(t); err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
	}
	return nil
}

func (b *Bank) computeHash() (string, error) {
	c, err := b.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalJSON re-encodes a JSON value with sorted object keys, keeping
// numbers exact.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Select returns the tasks a plan runs: hold-out tasks only when asked.
func (b *Bank) Select(includeHoldout bool) []Task {
	var out []Task
	for _, t := range b.Tasks {
		if t.Holdout && !includeHoldout {
			continue
		}
		out = append(out, t)
	}
	return out
}

// PublicBenchmarks lists the public benchmark names the bank draws on; a
// report must say that high scores on them may be recall.
func (b *Bank) PublicBenchmarks() []string {
	set := map[string]bool{}
	for _, t := range b.Tasks {
		if n, ok := t.PublicBenchmark(); ok {
			set[n] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Task returns the task with the given id.
func (b *Bank) Task(id string) (Task, bool) {
	for _, t := range b.Tasks {
		if t.ID == id {
			return t, true
		}
	}
	return Task{}, false
}
