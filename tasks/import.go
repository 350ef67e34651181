package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"rig/internal/atomicfile"
	"rig/internal/jsonerr"
	"rig/internal/textcheck"
)

// The formats Import reads: another tool's dataset, one task per row.
const (
	FromInspect   = "inspect"   // Inspect AI samples, JSONL or a JSON array
	FromPromptfoo = "promptfoo" // a promptfoo config or tests file (YAML)
	FromLMEval    = "lm-eval"   // lm-evaluation-harness --log_samples JSONL
	FromCSV       = "csv"       // a CSV file with a header row of column names
)

// ImportFormats lists the formats Import reads, for help and errors.
var ImportFormats = []string{FromInspect, FromPromptfoo, FromLMEval, FromCSV}

// Origin records where an imported bank came from: the format, the file's
// base name and the sha256 of its bytes, so a bank can be traced to the
// exact file it was converted from. It is part of the bank's content.
type Origin struct {
	Format string `json:"format"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (o *Origin) validate(file string, line int) error {
	switch {
	case o.Format == "":
		return &ParseError{File: file, Line: line, Field: "origin.format", Msg: "is empty", Fix: "name the format the bank was imported from: " + strings.Join(ImportFormats, ", ")}
	case o.File == "":
		return &ParseError{File: file, Line: line, Field: "origin.file", Msg: "is empty", Fix: "name the file the bank was imported from"}
	case !sha256Hex.MatchString(o.SHA256):
		return &ParseError{File: file, Line: line, Field: "origin.sha256", Msg: jsonerr.Quote(o.SHA256) + " is not a sha256", Fix: "64 lower-case hex digits: the sha256 of the imported file"}
	}
	return nil
}

// ImportOptions say how the rows of another tool's dataset become tasks.
// A "field" is where a row holds a value: a CSV column, a key of an Inspect
// sample's metadata, a promptfoo test's metadata or vars, an lm-eval doc.
// template_id and difficulty come from a field or from one value for every
// row, never from a guess.
type ImportOptions struct {
	From        string
	JobKind     string
	BankVersion string
	Description string
	// Source is every task's source: "private" or "public-benchmark:NAME".
	Source string

	Template, TemplateField     string
	Difficulty, DifficultyField string
	// HoldoutField names a field whose true/false (1/0, yes/no) marks the
	// row hold-out; without it no task is hold-out.
	HoldoutField string
	// IDField names the field holding a row's id where the format has no
	// id of its own (CSV, promptfoo); rows without one get an id derived
	// from their prompt and key.
	IDField string
	// PromptField and TargetField name the CSV columns of the prompt and
	// the answer; PromptField also names an lm-eval doc field to use
	// instead of the prompt lm-eval rendered.
	PromptField, TargetField string
	// Grader is how a target answer is graded (Inspect, lm-eval, CSV):
	// exact, normalized or contains. Empty means exact.
	Grader string
	// PromptTemplate is the promptfoo prompt its vars fill; empty means
	// the config's only prompt.
	PromptTemplate string
}

// importRow is one row of the source file, read by its format's parser.
type importRow struct {
	line   int    // line in the source file where the row starts
	where  string // the row's place in a YAML file ("tests[2]"), else ""
	id     string // the row's own id; empty to derive one
	prompt string
	grader GraderRef
	key    json.RawMessage
	// field looks up a named value of the row (see ImportOptions).
	field func(name string) (string, bool)
}

// importer gathers every problem of an import, in row order.
type importer struct {
	file string
	o    ImportOptions
	errs *BankError
}

// fail adds a problem of the row at field.
func (im *importer) fail(r *importRow, field, msg, fix string) {
	if r != nil && r.where != "" {
		field = r.where + "." + field
	}
	line := 0
	if r != nil {
		line = r.line
	}
	im.errs.add(&ParseError{File: im.file, Line: line, Field: field, Msg: msg, Fix: fix})
}

// Import converts another tool's dataset (data, read from file) into a bank
// that parses, names registered graders and whose every key passes its own
// grader, so `rig tasks lint` and `rig tasks audit` take it. Any problem
// refuses the whole file: a *BankError names each row's line and field.
func Import(ctx context.Context, data []byte, file string, o ImportOptions, reg *Registry) (*Bank, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	im := &importer{file: file, o: o, errs: &BankError{File: file}}
	// A bank is UTF-8 (ParseBank refuses anything else); bytes that are not
	// would be replaced on the way in, and the bank would no longer say
	// what the file said.
	var ue *textcheck.Error
	if errors.As(textcheck.UTF8At(file, data, 1, 0), &ue) {
		im.errs.add(&ParseError{File: file, Line: ue.Line, Field: "text", Msg: ue.Reason(), Fix: "save the file as UTF-8", Err: ue})
		return nil, im.errs
	}
	var rows []importRow
	switch o.From {
	case FromInspect:
		rows = im.inspect(data)
	case FromPromptfoo:
		rows = im.promptfoo(data)
	case FromLMEval:
		rows = im.lmeval(data)
	case FromCSV:
		rows = im.csv(data)
	}
	if im.errs.Count == 0 && len(rows) == 0 {
		im.fail(nil, "rows", "no rows to import", "the file holds no samples, tests or rows")
	}
	sum := sha256.Sum256(data)
	b := &Bank{File: file, Header: Header{
		SchemaVersion: SchemaVersion, JobKind: o.JobKind, BankVersion: o.BankVersion, Description: o.Description,
		Origin: &Origin{Format: o.From, File: filepath.Base(file), SHA256: hex.EncodeToString(sum[:])},
	}}
	if b.Header.Description == "" {
		b.Header.Description = fmt.Sprintf("imported from %s (%s)", filepath.Base(file), o.From)
	}
	b.Tasks = im.tasks(ctx, rows, b.Header, reg)
	if im.errs.Count > 0 {
		return nil, im.errs
	}
	h, err := b.computeHash()
	if err != nil {
		return nil, fmt.Errorf("%s: hash: %w", file, err)
	}
	b.Hash = h
	return b, nil
}

// check refuses options that leave a task's field to a guess.
func (o ImportOptions) check() error {
	var probs []string
	if !slices.Contains(ImportFormats, o.From) {
		probs = append(probs, fmt.Sprintf("--from %s: unknown format (use %s)", jsonerr.Quote(o.From), strings.Join(ImportFormats, ", ")))
	}
	if o.JobKind == "" {
		probs = append(probs, "--job-kind: is empty (name the job kind the bank is for, as the design's job_kinds[].name)")
	}
	if o.BankVersion == "" {
		probs = append(probs, `--bank-version: is empty (set a version such as "1"; bump it on every re-import)`)
	}
	if name, ok := strings.CutPrefix(o.Source, sourcePublicBenchmark); o.Source != SourcePrivate && (!ok || name == "") {
		probs = append(probs, fmt.Sprintf(`--source %s: say where the rows come from: "private" (written in-house) or "public-benchmark:NAME" (public tasks are only a change detector: a high score may be recall)`, jsonerr.Quote(o.Source)))
	}
	for _, p := range []struct{ flag, task, value, field string }{{"template", "template_id", o.Template, o.TemplateField}, {"difficulty", "difficulty", o.Difficulty, o.DifficultyField}} {
		switch {
		case p.value == "" && p.field == "":
			probs = append(probs, fmt.Sprintf("%s is not known: give --%s-field NAME (the column or metadata key holding it) or --%s VALUE (one for every row); rig never invents it", p.task, p.flag, p.flag))
		case p.value != "" && p.field != "":
			probs = append(probs, fmt.Sprintf("--%s and --%s-field: give one of them", p.flag, p.flag))
		}
	}
	if o.Difficulty != "" && o.Difficulty != Easy && o.Difficulty != Medium && o.Difficulty != Hard {
		probs = append(probs, fmt.Sprintf("--difficulty %s: use easy, medium or hard", jsonerr.Quote(o.Difficulty)))
	}
	if o.Grader != "" && !slices.Contains(targetGraders, o.Grader) {
		probs = append(probs, fmt.Sprintf("--grader %s: use %s", jsonerr.Quote(o.Grader), strings.Join(targetGraders, ", ")))
	}
	if len(probs) > 0 {
		return errors.New("rig tasks import: " + strings.Join(probs, "\n  "))
	}
	return nil
}

// The ways a target answer is graded, and the grader each maps to.
var targetGraders = []string{"exact", "normalized", "contains"}

// answerKey builds the key of a row whose answer is one of targets.
func (o ImportOptions) answerKey(targets []string) (GraderRef, json.RawMessage, error) {
	switch o.Grader {
	case "", "exact", "normalized":
		name := o.Grader
		if name == "" {
			name = "exact"
		}
		k, err := json.Marshal(answerKey{Answer: targets[0], Accept: targets[1:]})
		return GraderRef{Name: name, Version: 1}, k, err
	default: // contains
		return containsKey(targets, false)
	}
}

// containsKey is a regex key that passes when the output holds one of the
// strings, as promptfoo's contains and icontains do.
func containsKey(strs []string, fold bool) (GraderRef, json.RawMessage, error) {
	quoted := make([]string, len(strs))
	for i, s := range strs {
		quoted[i] = regexp.QuoteMeta(s)
	}
	pattern := strings.Join(quoted, "|")
	if len(quoted) > 1 {
		pattern = "(?:" + pattern + ")"
	}
	if fold {
		pattern = "(?i)" + pattern
	}
	k, err := json.Marshal(regexKey{Pattern: pattern, Example: strs[0]})
	return GraderRef{Name: "regex", Version: 1}, k, err
}

// tasks turns rows into tasks, checking each as the bank reader and the
// audit would, with problems placed at the row of the source file.
func (im *importer) tasks(ctx context.Context, rows []importRow, h Header, reg *Registry) []Task {
	out := make([]Task, 0, len(rows))
	seen := map[string]*importRow{}
	for i := range rows {
		r := &rows[i]
		t, ok := im.task(r, h)
		if !ok {
			continue
		}
		if prev := seen[t.ID]; prev != nil {
			im.fail(r, "id", fmt.Sprintf("%s is also the id of the row at line %d", jsonerr.Quote(t.ID), prev.line), "give every row a unique id; a derived id repeats when two rows have the same prompt and key (one case counted twice)")
			continue
		}
		seen[t.ID] = r
		n := im.errs.Count
		sub := &BankError{File: im.file}
		t.line = r.line
		t.validate(im.file, h, true, sub)
		for _, p := range sub.Problems {
			im.fail(r, p.Field, p.Msg, p.Fix)
		}
		if im.errs.Count > n {
			continue
		}
		if err := checkKey(ctx, reg, t); err != nil {
			im.fail(r, "key", "fails its own grader "+t.Grader.String()+": "+err.Error(), "the answer must pass the grader it maps to; fix the row")
			continue
		}
		out = append(out, t)
	}
	return out
}

// task fills one row's task fields from the row and the options.
func (im *importer) task(r *importRow, h Header) (Task, bool) {
	o := im.o
	t := Task{ID: r.id, JobKind: h.JobKind, Input: Input{Prompt: r.prompt}, Key: r.key, Grader: r.grader, Source: o.Source}
	ok := true
	pick := func(value, field, what, fix string) string {
		if value != "" {
			return value
		}
		v, found := r.field(field)
		if !found || strings.TrimSpace(v) == "" {
			im.fail(r, field, fmt.Sprintf("is missing (named by --%s-field for %s)", what, what), fix)
			ok = false
		}
		return strings.TrimSpace(v)
	}
	t.TemplateID = pick(o.Template, o.TemplateField, "template", "give every row its template, or --template VALUE for all")
	t.Difficulty = pick(o.Difficulty, o.DifficultyField, "difficulty", "give every row easy, medium or hard, or --difficulty VALUE for all")
	if o.DifficultyField != "" {
		t.Difficulty = strings.ToLower(t.Difficulty)
	}
	if o.HoldoutField != "" {
		v, _ := r.field(o.HoldoutField)
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "1", "yes":
			t.Holdout = true
		case "false", "0", "no", "":
		default:
			im.fail(r, o.HoldoutField, jsonerr.Quote(v)+" is not true or false", "write true/false (1/0, yes/no), or leave it empty for not hold-out")
			ok = false
		}
	}
	if t.ID == "" && o.IDField != "" {
		t.ID, _ = r.field(o.IDField)
		t.ID = strings.TrimSpace(t.ID)
	}
	if t.ID == "" {
		t.ID = derivedID(r.prompt, r.key)
	}
	return t, ok
}

// derivedID names a row by its content: the same prompt and key give the
// same id on every import, so re-importing an edited file keeps the ids of
// the rows that did not change.
func derivedID(prompt string, key json.RawMessage) string {
	canon, err := canonicalJSON(key)
	if err != nil {
		canon = key
	}
	sum := sha256.Sum256([]byte(prompt + "\x00" + string(canon)))
	return "t-" + hex.EncodeToString(sum[:6])
}

// scalarString is a JSON scalar as text: a string as is, a number or a
// boolean as written; ok is false for null, arrays and objects.
func scalarString(raw json.RawMessage) (string, bool) {
	var v any
	if err := jsonUnmarshal(raw, &v); err != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return fmt.Sprint(x), true
	}
	return "", false
}

// lineOf is the 1-based line of byte offset off in data.
func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	n := 1
	for _, c := range data[:off] {
		if c == '\n' {
			n++
		}
	}
	return n
}

// RunImport is `rig tasks import`: it reads file (within the bank's size
// cap), converts it and writes the bank to out atomically, never over an
// existing file, then prints what it wrote and what is left to do. Nothing
// is written when any row is refused.
func RunImport(ctx context.Context, w io.Writer, file, out string, o ImportOptions, reg *Registry) (*Bank, error) {
	if out == "" {
		return nil, errors.New("rig tasks import: --out is empty (name the bank file to write, e.g. --out banks/" + o.JobKind + ".jsonl)")
	}
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("rig tasks import: %s exists (an import never overwrites a bank: choose another --out, or remove it and bump --bank-version)", out)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("rig tasks import: %w", err)
	}
	defer f.Close()
	if err := BankCap.Check(f, file); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, BankCap.Limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", file, err)
	}
	b, err := Import(ctx, data, file, o, reg)
	if err != nil {
		return nil, err
	}
	b.File = out
	if err := atomicfile.Write(out, 0o644, b.Encode); err != nil {
		return nil, fmt.Errorf("rig tasks import: write %s: %w", out, err)
	}
	return b, importSummary(w, b)
}

// importSummary says what was written and the steps every bank still
// takes before a design may use it.
func importSummary(w io.Writer, b *Bank) error {
	graders := map[string]int{}
	templates := map[string]bool{}
	holdout := 0
	for _, t := range b.Tasks {
		graders[t.Grader.String()]++
		templates[t.TemplateID] = true
		if t.Holdout {
			holdout++
		}
	}
	names := make([]string, 0, len(graders))
	for g, n := range graders {
		names = append(names, fmt.Sprintf("%s ×%d", g, n))
	}
	slices.Sort(names)
	o := b.Header.Origin
	fmt.Fprintf(w, "wrote %s: %d tasks of job kind %s, bank_version %s, %d templates, %d hold-out, graders %s\n",
		b.File, len(b.Tasks), b.Header.JobKind, b.Header.BankVersion, len(templates), holdout, strings.Join(names, ", "))
	fmt.Fprintf(w, "origin: %s (%s, sha256 %s); bank hash %s\n", o.File, o.Format, o.SHA256, b.Hash)
	if len(graders) > 1 {
		fmt.Fprintf(w, "note: a design's job kind grades with one grader; split the tests by assertion kind into one bank each to use them all\n")
	}
	_, err := fmt.Fprintf(w, "next: rig tasks lint %[1]s; rig tasks audit %[1]s; add the dataset to the study's licence registry (docs/licences.md): a design using the bank is refused until it is there\n", b.File)
	return err
}
