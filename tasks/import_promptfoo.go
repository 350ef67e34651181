package tasks

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"rig/internal/jsonerr"
)

// pfTest is one promptfoo test case. Only what becomes a task is read;
// options, thresholds and providers are the promptfoo run's, not the case's.
type pfTest struct {
	Description string         `yaml:"description"`
	Vars        map[string]any `yaml:"vars"`
	Assert      []pfAssert     `yaml:"assert"`
	Metadata    map[string]any `yaml:"metadata"`
}

type pfAssert struct {
	Type  string `yaml:"type"`
	Value any    `yaml:"value"`
}

// pfAssertKinds are the promptfoo assertions rig grades, each with the
// grader it maps to (docs/tasks.md).
var pfAssertKinds = []string{"equals", "contains", "icontains", "regex", "is-json"}

// pfVar is a plain Nunjucks variable, the only template syntax rendered;
// anything else ({% %}, filters) would need Nunjucks and is refused.
var pfVar = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// promptfoo reads a promptfoo config (prompts, tests, defaultTest) or a
// bare list of tests, and renders each test's vars into the prompt.
func (im *importer) promptfoo(data []byte) []importRow {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		im.fail(nil, "yaml", "malformed YAML: "+err.Error(), "give a promptfoo config or tests file")
		return nil
	}
	if len(doc.Content) == 0 {
		im.fail(nil, "tests", "the file is empty", "give a promptfoo config or tests file")
		return nil
	}
	root := doc.Content[0]
	tests, prompts, defaults := root, (*yaml.Node)(nil), pfTest{}
	if root.Kind == yaml.MappingNode {
		tests, prompts = mapValue(root, "tests"), mapValue(root, "prompts")
		if d := mapValue(root, "defaultTest"); d != nil {
			if err := d.Decode(&defaults); err != nil {
				im.fail(&importRow{line: d.Line}, "defaultTest", err.Error(), "defaultTest is a test: vars, assert, metadata")
				return nil
			}
		}
	}
	if tests == nil || tests.Kind != yaml.SequenceNode {
		line := root.Line
		if tests != nil {
			line = tests.Line
		}
		im.fail(&importRow{line: line}, "tests", "is not a list of tests", "list the tests in this file (a tests: file reference is not followed; import that file itself)")
		return nil
	}
	template, ok := im.pfTemplate(prompts)
	if !ok {
		return nil
	}
	var rows []importRow
	for i, n := range tests.Content {
		r := importRow{line: n.Line, where: fmt.Sprintf("tests[%d]", i)}
		var t pfTest
		if err := n.Decode(&t); err != nil {
			im.fail(&r, "test", err.Error(), "a test has vars, assert and metadata")
			continue
		}
		if im.pfRow(&r, t, defaults, template) {
			rows = append(rows, r)
		}
	}
	return rows
}

// mapValue is the value under key in a YAML mapping, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// pfTemplate is the prompt the vars fill: --prompt, or the config's only
// prompt written inline.
func (im *importer) pfTemplate(prompts *yaml.Node) (string, bool) {
	where := &importRow{line: 0}
	template, field := im.o.PromptTemplate, "--prompt"
	if template == "" {
		var list []any
		if prompts != nil {
			where.line = prompts.Line
			if err := prompts.Decode(&list); err != nil {
				var one string
				if prompts.Decode(&one) == nil {
					list = []any{one}
				}
			}
		}
		if len(list) != 1 {
			im.fail(where, "prompts", fmt.Sprintf("%d prompts: the tests become one bank with one prompt", len(list)), "give the prompt template with --prompt TEXT")
			return "", false
		}
		switch p := list[0].(type) {
		case string:
			template = p
		case map[string]any:
			template, _ = p["raw"].(string)
		}
		field = "prompts[0]"
		if template == "" || strings.HasPrefix(template, "file://") {
			im.fail(where, field, "is not an inline prompt", "give the prompt template with --prompt TEXT (rig does not follow file:// references)")
			return "", false
		}
	}
	if rest := pfVar.ReplaceAllString(template, ""); strings.Contains(rest, "{{") || strings.Contains(rest, "{%") {
		im.fail(where, field, "uses Nunjucks beyond {{ var }}", "rig renders plain {{ var }} substitutions only; render the prompts first, or simplify the template")
		return "", false
	}
	return template, true
}

// pfRow fills one test's row: vars rendered into the template, and its one
// assertion as a key. defaults is the config's defaultTest.
func (im *importer) pfRow(r *importRow, t pfTest, defaults pfTest, template string) bool {
	vars := map[string]any{}
	for k, v := range defaults.Vars {
		vars[k] = v
	}
	for k, v := range t.Vars {
		vars[k] = v
	}
	ok := true
	var rendered strings.Builder
	last := 0
	for _, m := range pfVar.FindAllStringSubmatchIndex(template, -1) {
		name := template[m[2]:m[3]]
		v, found := vars[name]
		s, scalar := yamlScalar(v)
		switch {
		case !found:
			im.fail(r, "vars."+name, "is missing (the prompt uses it)", "give the test this var, or a default in defaultTest.vars")
			ok = false
		case !scalar || strings.HasPrefix(s, "file://"):
			im.fail(r, "vars."+name, "is not a plain value", "rig renders string and number vars; a list (promptfoo's test matrix) or a file:// reference is not expanded")
			ok = false
		}
		rendered.WriteString(template[last:m[0]])
		rendered.WriteString(s)
		last = m[1]
	}
	rendered.WriteString(template[last:])
	r.prompt = rendered.String()
	asserts := append(append([]pfAssert{}, defaults.Assert...), t.Assert...)
	if len(asserts) != 1 {
		im.fail(r, "assert", fmt.Sprintf("has %d assertions (defaultTest's included)", len(asserts)), "rig grades a task with one grader: keep one of "+strings.Join(pfAssertKinds, ", "))
		return false
	}
	if !im.pfKey(r, asserts[0], t.Metadata) {
		return false
	}
	r.field = func(name string) (string, bool) {
		if v, found := t.Metadata[name]; found {
			return yamlScalar(v)
		}
		return yamlScalar(vars[name])
	}
	return ok
}

// pfKey maps one promptfoo assertion to a rig grader and key.
func (im *importer) pfKey(r *importRow, a pfAssert, meta map[string]any) bool {
	value, scalar := yamlScalar(a.Value)
	fail := func(field, msg, fix string) bool { im.fail(r, "assert[0]."+field, msg, fix); return false }
	var err error
	switch a.Type {
	case "equals":
		if !scalar || value == "" {
			return fail("value", "is not a non-empty string", "equals compares the output with one string")
		}
		r.grader = GraderRef{Name: "exact", Version: 1}
		r.key, err = json.Marshal(answerKey{Answer: value})
	case "contains", "icontains":
		if !scalar || value == "" {
			return fail("value", "is not a non-empty string", a.Type+" looks for one string in the output")
		}
		r.grader, r.key, err = containsKey([]string{value}, a.Type == "icontains")
	case "regex":
		example, _ := yamlScalar(meta["example"])
		if !scalar || value == "" {
			return fail("value", "is not a non-empty pattern", "regex takes a pattern")
		}
		if _, cerr := regexp.Compile(value); cerr != nil {
			return fail("value", "is not an RE2 pattern rig can run: "+cerr.Error(), "rewrite the pattern without look-around or back-references")
		}
		if example == "" {
			return fail("value", "has no example output", "add metadata: {example: <an output the pattern accepts>} to the test; the audit checks every key against its own grader")
		}
		r.grader = GraderRef{Name: "regex", Version: 1}
		r.key, err = json.Marshal(regexKey{Pattern: value, Example: example})
	case "is-json":
		r.grader = GraderRef{Name: "jsonvalid", Version: 1}
		r.key, err = isJSONKey(a.Value, meta)
		if err != nil {
			return fail("value", err.Error(), "give a JSON Schema object as value, and metadata.example an output it accepts")
		}
	case "javascript", "python":
		return fail("type", a.Type+" runs code rig does not run", "rewrite it as one of "+strings.Join(pfAssertKinds, ", ")+", or leave the test out")
	default:
		return fail("type", jsonerr.Quote(a.Type)+" is not an assertion rig grades", "use one of "+strings.Join(pfAssertKinds, ", "))
	}
	if err != nil {
		return fail("value", err.Error(), "")
	}
	return true
}

// isJSONKey is the jsonvalid key of an is-json assertion: its schema (the
// assertion's value, when given) and an example output that passes it.
func isJSONKey(schema any, meta map[string]any) (json.RawMessage, error) {
	k := jsonValidKey{}
	if schema != nil {
		m, ok := schema.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("is not a JSON Schema object")
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		k.Schema = b
		k.Example, _ = yamlScalar(meta["example"])
	}
	return json.Marshal(k)
}

// yamlScalar is a decoded YAML scalar as text; ok is false for a list, a
// map or nothing.
func yamlScalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(x), true
	}
	return "", false
}
