package tasks

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// importCase is one fixture of tasks/testdata/import and the options that
// convert it. lmeval-shape.jsonl is written by hand in the shape lm-eval
// 0.4's --log_samples writes (and one row in the older list shape); it is
// not lm-eval's output.
type importCase struct {
	file string
	o    ImportOptions
}

func importCases() []importCase {
	return []importCase{
		{"inspect.jsonl", ImportOptions{From: FromInspect, JobKind: "trivia", BankVersion: "1", Source: SourcePrivate, TemplateField: "category", DifficultyField: "level"}},
		{"promptfooconfig.yaml", ImportOptions{From: FromPromptfoo, JobKind: "support", BankVersion: "1", Source: SourcePrivate, TemplateField: "topic", DifficultyField: "level"}},
		{"lmeval-shape.jsonl", ImportOptions{From: FromLMEval, JobKind: "arith", BankVersion: "1", Source: "public-benchmark:arith", TemplateField: "kind", Difficulty: Easy}},
		{"cases.csv", ImportOptions{From: FromCSV, JobKind: "qa", BankVersion: "1", Source: SourcePrivate, PromptField: "question", TargetField: "answer", IDField: "id", TemplateField: "template", DifficultyField: "difficulty", HoldoutField: "holdout", Grader: "normalized"}},
	}
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "import", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestImportedBanksPassLintAndAudit: each format's fixture becomes a bank
// file that the strict reader loads with the same hash, whose lint finds
// no failing key, and whose audit writes its record.
func TestImportedBanksPassLintAndAudit(t *testing.T) {
	want := map[string]int{"inspect.jsonl": 5, "promptfooconfig.yaml": 5, "lmeval-shape.jsonl": 3, "cases.csv": 4}
	for _, c := range importCases() {
		t.Run(c.file, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "bank.jsonl")
			var log bytes.Buffer
			b, err := RunImport(context.Background(), &log, filepath.Join("testdata", "import", c.file), out, c.o, DefaultRegistry(nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Tasks) != want[c.file] {
				t.Errorf("%d tasks, want %d", len(b.Tasks), want[c.file])
			}
			loaded, err := LoadBank(out)
			if err != nil {
				t.Fatalf("the written bank does not load: %v", err)
			}
			if loaded.Hash != b.Hash || loaded.Header.Origin == nil || loaded.Header.Origin.Format != c.o.From || loaded.Header.Origin.File != c.file {
				t.Errorf("loaded hash %s origin %+v; want hash %s and origin %s %s", loaded.Hash, loaded.Header.Origin, b.Hash, c.o.From, c.file)
			}
			if r := Lint(context.Background(), loaded, DefaultRegistry(nil)); !r.OK() {
				t.Errorf("lint: %+v", r)
			}
			if _, err := Audit(context.Background(), loaded, DefaultRegistry(nil), filepath.Join(dir, "audits")); err != nil {
				t.Errorf("audit: %v", err)
			}
			if !strings.Contains(log.String(), "licence registry") {
				t.Errorf("the summary does not say the dataset needs a licence entry:\n%s", log.String())
			}
			if _, err := RunImport(context.Background(), &log, filepath.Join("testdata", "import", c.file), out, c.o, DefaultRegistry(nil)); err == nil || !strings.Contains(err.Error(), "exists") {
				t.Errorf("a second import over the bank: %v, want refused", err)
			}
		})
	}
}

// TestImportMapsEachFormat pins what each format's rows become: the chat
// messages joined, choices lettered, asserts mapped to graders, hold-out
// read from its column.
func TestImportMapsEachFormat(t *testing.T) {
	banks := map[string]*Bank{}
	for _, c := range importCases() {
		b, err := Import(context.Background(), readFixture(t, c.file), c.file, c.o, DefaultRegistry(nil))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		banks[c.file] = b
	}
	task := func(file, id string) Task {
		t.Helper()
		tk, ok := banks[file].Task(id)
		if !ok {
			t.Fatalf("%s: no task %s", file, id)
		}
		return tk
	}
	if p := task("inspect.jsonl", "cap-jp").Input.Prompt; p != "Answer with one word.\n\nWhat is the capital of Japan?" {
		t.Errorf("chat input = %q", p)
	}
	mc := task("inspect.jsonl", "3")
	if !strings.Contains(mc.Input.Prompt, "B) Mars") || string(mc.Key) != `{"answer":"B"}` || mc.Difficulty != Medium {
		t.Errorf("multiple choice: %q key %s difficulty %s", mc.Input.Prompt, mc.Key, mc.Difficulty)
	}
	graders := map[string]string{}
	for _, tk := range banks["promptfooconfig.yaml"].Tasks {
		graders[tk.TemplateID] = tk.Grader.String()
		if strings.Contains(tk.Input.Prompt, "{{") || !strings.HasPrefix(tk.Input.Prompt, "Answer the customer in one short sentence. Question: ") {
			t.Errorf("prompt not rendered: %q", tk.Input.Prompt)
		}
	}
	for topic, g := range map[string]string{"hours": "regex@v1", "payment": "regex@v1", "orders": "regex@v1", "shipping": "exact@v1", "address": "jsonvalid@v1"} {
		if graders[topic] != g {
			t.Errorf("promptfoo %s: grader %s, want %s", topic, graders[topic], g)
		}
	}
	if q3 := task("cases.csv", "q3"); !q3.Holdout || q3.Grader.Name != "normalized" {
		t.Errorf("csv q3: holdout %v grader %s", q3.Holdout, q3.Grader)
	}
	if lm := task("lmeval-shape.jsonl", "2"); lm.Input.Prompt != "Question: What is 100 - 58?\nAnswer:" || lm.Source != "public-benchmark:arith" {
		t.Errorf("lm-eval list-shaped arguments: %q %s", lm.Input.Prompt, lm.Source)
	}
}

// TestImportRefusesBadRowsNamingRowAndField: a malformed row of each
// format is refused, the problem naming its line and field, and every
// problem of the file is reported at once.
func TestImportRefusesBadRowsNamingRowAndField(t *testing.T) {
	cases := importCases()
	tests := []struct {
		c          importCase
		edit       func(string) string
		line       int
		field, msg string
	}{
		{cases[0], func(s string) string { return strings.Replace(s, `"target": "42"`, `"target": []`, 1) }, 4, "target", "is empty"},
		{cases[0], func(s string) string { return strings.Replace(s, `"target": "B"`, `"target": "D"`, 1) }, 3, "target", "not the letter"},
		{cases[0], func(s string) string { return strings.Replace(s, `"category": "arithmetic", `, ``, 1) }, 4, "category", "is missing"},
		{cases[0], func(s string) string { return strings.Replace(s, `"metadata"`, `"sandbox": "docker", "metadata"`, 1) }, 1, "sandbox", "sandbox"},
		{cases[0], func(s string) string {
			return strings.Replace(s, `"id": "cap-au", "input"`, `"id": "cap-au", "inptu"`, 1)
		}, 5, "inptu", "unknown field"},
		{cases[1], func(s string) string { return strings.Replace(s, "type: contains", "type: javascript", 1) }, 18, "tests[1].assert[0].type", "javascript runs code"},
		{cases[1], func(s string) string { return strings.Replace(s, "      example: ORD-123456\n", "", 1) }, 26, "tests[2].assert[0].value", "no example"},
		{cases[1], func(s string) string { return strings.Replace(s, "question: When does", "q: When does", 1) }, 9, "tests[0].vars.question", "is missing"},
		{cases[1], func(s string) string { return strings.Replace(s, "      level: medium\n", "      level: trivial\n", 1) }, 18, "tests[1].difficulty", "trivial"},
		{cases[2], func(s string) string {
			return strings.Replace(s, `"target": "42", "arguments": [[`, `"target": null, "arguments": [[`, 1)
		}, 3, "target", "is missing"},
		{cases[2], func(s string) string {
			return strings.Replace(s, `{"gen_args_0": {"arg_0": "Question: What is 7`, `{"gen_args_1": {}, "gen_args_0": {"arg_0": "Question: What is 7`, 1)
		}, 2, "arguments", "loglikelihood"},
		{cases[3], func(s string) string { return strings.Replace(s, ",Pacific,", ",,", 1) }, 3, "answer", "is empty"},
		{cases[3], func(s string) string { return strings.Replace(s, "spelling,hard", "spelling,extreme", 1) }, 5, "difficulty", "extreme"},
		{cases[3], func(s string) string { return strings.Replace(s, "q2,", "q 2,", 1) }, 3, "id", "not a valid id"},
		{cases[3], func(s string) string { return strings.Replace(s, "q4,", "q1,", 1) }, 5, "id", "also the id of the row at line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.c.file+":"+tt.field, func(t *testing.T) {
			src := string(readFixture(t, tt.c.file))
			bad := tt.edit(src)
			if bad == src {
				t.Fatal("the edit changed nothing")
			}
			b, err := Import(context.Background(), []byte(bad), tt.c.file, tt.c.o, DefaultRegistry(nil))
			if b != nil {
				t.Fatal("a bank was returned with a refused row")
			}
			var be *BankError
			if !errors.As(err, &be) {
				t.Fatalf("err = %v, want a *BankError", err)
			}
			for _, p := range be.Problems {
				if p.Line == tt.line && p.Field == tt.field && strings.Contains(p.Msg, tt.msg) && p.Fix != "" {
					return
				}
			}
			t.Errorf("no problem at line %d field %q saying %q with a fix:\n%v", tt.line, tt.field, tt.msg, err)
		})
	}
}

// TestImportNeverGuesses: without a source for template_id or difficulty,
// or for source, the import refuses with the flag that fixes it.
func TestImportNeverGuesses(t *testing.T) {
	c := importCases()[0]
	for _, tt := range []struct {
		edit func(*ImportOptions)
		want string
	}{
		{func(o *ImportOptions) { o.TemplateField = "" }, "--template-field NAME"},
		{func(o *ImportOptions) { o.DifficultyField = "" }, "--difficulty-field NAME"},
		{func(o *ImportOptions) { o.Source = "" }, "--source"},
		{func(o *ImportOptions) { o.Template = "x" }, "give one of them"},
		{func(o *ImportOptions) { o.From = "yaml" }, "unknown format"},
	} {
		o := c.o
		tt.edit(&o)
		_, err := Import(context.Background(), readFixture(t, c.file), c.file, o, DefaultRegistry(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want it to say %q", err, tt.want)
		}
	}
}

// TestImportDerivedIDsAreStable: rows without an id are named by their
// content, the same on every import and apart for different rows.
func TestImportDerivedIDsAreStable(t *testing.T) {
	c := importCases()[1]
	data := readFixture(t, c.file)
	a, err := Import(context.Background(), data, c.file, c.o, DefaultRegistry(nil))
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(data, []byte("Which card brands"), []byte("Which payment cards"), 1)
	b, err := Import(context.Background(), edited, c.file, c.o, DefaultRegistry(nil))
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i := range a.Tasks {
		if a.Tasks[i].ID == b.Tasks[i].ID {
			same++
		}
		if !strings.HasPrefix(a.Tasks[i].ID, "t-") {
			t.Errorf("derived id %q", a.Tasks[i].ID)
		}
	}
	if same != len(a.Tasks)-1 {
		t.Errorf("%d of %d ids kept after editing one row, want all but one", same, len(a.Tasks))
	}
	if a.Header.Origin.SHA256 == b.Header.Origin.SHA256 {
		t.Error("origin sha256 did not change with the file")
	}
}

// TestParseBankSaysTheHeaderIsMissingFirst: an Inspect file or a YAML file
// given to the bank reader is refused first for its missing header, then
// for every other problem.
func TestParseBankSaysTheHeaderIsMissingFirst(t *testing.T) {
	for _, tt := range []struct {
		file, fix string
		more      bool
	}{
		{"inspect.jsonl", "--from inspect", true},
		{"lmeval-shape.jsonl", "--from lm-eval", true},
		{"promptfooconfig.yaml", "--from inspect|promptfoo", true},
	} {
		_, err := ParseBank(bytes.NewReader(readFixture(t, tt.file)), tt.file)
		var be *BankError
		if !errors.As(err, &be) || len(be.Problems) == 0 {
			t.Fatalf("%s: err = %v", tt.file, err)
		}
		first := be.Problems[0]
		if first.Line != 1 || first.Field != "header" || !strings.Contains(first.Msg, "the first line must be the bank's header") || !strings.Contains(first.Fix, tt.fix) {
			t.Errorf("%s: first problem %v, want line 1 header saying the header comes first and %q", tt.file, first, tt.fix)
		}
		if tt.more && be.Count < 2 {
			t.Errorf("%s: only the header problem reported:\n%v", tt.file, err)
		}
	}
	// A bank whose header is missing but whose tasks are good says only that.
	_, err := ParseBank(strings.NewReader(testTask("a")+"\n"+testTask("b")+"\n"), "bank.jsonl")
	var be *BankError
	if !errors.As(err, &be) || be.Count != 1 || be.Problems[0].Field != "header" {
		t.Errorf("tasks without a header: %v", err)
	}
	_, err = ParseBank(strings.NewReader(""), "empty.jsonl")
	if err == nil || !strings.Contains(err.Error(), "the first line must be the bank's header") {
		t.Errorf("empty bank: %v", err)
	}
}

// TestJSONValidGrader grades promptfoo's is-json: the whole output must be
// JSON, and satisfy the key's schema when there is one.
func TestJSONValidGrader(t *testing.T) {
	schema := Task{ID: "a", Key: []byte(`{"schema":{"type":"object","required":["city"]},"example":"{\"city\":\"Oslo\"}"}`)}
	plain := Task{ID: "b", Key: []byte(`{}`)}
	for _, tt := range []struct {
		task Task
		out  string
		pass bool
	}{
		{schema, `{"city": "Oslo"}`, true},
		{schema, ` {"street": "x"} `, false},
		{schema, "Sure! {\"city\": \"Oslo\"}", false},
		{plain, `[1, 2]`, true},
		{plain, `{"a": 1} trailing`, false},
		{plain, ``, false},
	} {
		g, err := JSONValid{}.Grade(context.Background(), tt.task, Output{Text: tt.out})
		if err != nil {
			t.Fatal(err)
		}
		if g.Pass != tt.pass {
			t.Errorf("%s on %q: pass %v, want %v", tt.task.Key, tt.out, g.Pass, tt.pass)
		}
	}
	if err := (JSONValid{}).CheckKey(Task{Key: []byte(`{"schema":{"type":"object"}}`)}); err == nil {
		t.Error("a schema without an example was accepted")
	}
	if err := (JSONValid{}).CheckKey(Task{Key: []byte(`{"schema":{"type":17},"example":"{}"}`)}); err == nil {
		t.Error("a schema that does not compile was accepted")
	}
}
