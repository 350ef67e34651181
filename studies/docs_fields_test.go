package studies

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// designFields lists every JSON field the design reader accepts, derived
// from the Go types it decodes into, as dotted paths (arms[].pins.quant).
func designFields() []string {
	var out []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			if t.Kind() == reflect.Slice {
				prefix += "[]"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for name, f := range jsonFields(t) {
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			out = append(out, p)
			walk(f.Type, p)
		}
	}
	walk(reflect.TypeFor[Design](), "")
	sort.Strings(out)
	return out
}

// codeSpan is one `...` span of Markdown; fieldWord one name in it.
var (
	codeSpan  = regexp.MustCompile("`[^`]+`")
	fieldWord = regexp.MustCompile(`[a-z0-9_]+`)
)

// fieldRows reads the Fields table of docs/design.md: for each row, the
// field its first cell names ("arms[].pins" as arms.pins) and the words of
// the code spans in the rest of the row.
func fieldRows(t *testing.T) map[string]map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Fields\n")
	if !ok {
		t.Fatal(`docs/design.md has no "## Fields" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.SplitN(line, "|", 3)
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		key := strings.ReplaceAll(strings.Trim(strings.TrimSpace(cells[1]), "`"), "[]", "")
		words := map[string]bool{}
		for _, span := range codeSpan.FindAllString(cells[2], -1) {
			for _, w := range fieldWord.FindAllString(span, -1) {
				words[w] = true
			}
		}
		rows[key] = words
	}
	return rows
}

// TestEveryFieldIsDocumented: every field the reader accepts, derived from
// the Go types it decodes into, is described in docs/design.md's Fields
// table (a top-level field by its own row, a nested one in a code span of
// the row of its nearest documented parent: `model {registry_name, file}`
// in the arms[] row), and is in the published schema. A field added to the
// Go type and described in neither fails here.
func TestEveryFieldIsDocumented(t *testing.T) {
	rows := fieldRows(t)
	c := loadSchema(t)
	fields := designFields()
	if len(fields) < 80 {
		t.Fatalf("only %d fields derived from the Design type", len(fields))
	}
	for _, f := range fields {
		plain := strings.ReplaceAll(f, "[]", "")
		if _, own := rows[plain]; !own {
			parent, name := "", plain[strings.LastIndex(plain, ".")+1:]
			for k := range rows {
				if strings.HasPrefix(plain, k+".") && len(k) > len(parent) {
					parent = k
				}
			}
			if parent == "" || !rows[parent][name] {
				t.Errorf("%s is accepted by the reader but not described in docs/design.md's Fields table (give it a row, or name it in its parent's row %q)", f, parent)
			}
		}
		var p []any
		for _, seg := range strings.Split(f, ".") {
			name, list := strings.CutSuffix(seg, "[]")
			p = append(p, name)
			if list {
				p = append(p, 0)
			}
		}
		if c.nodeOrNil(p) == nil {
			t.Errorf("%s is accepted by the reader but not in the schema", f)
		}
	}
}

// nodeOrNil is nodeAt for a path that may not be in the schema.
func (c schemaCheck) nodeOrNil(p []any) map[string]any {
	node := c.root
	deref := func(n map[string]any) map[string]any {
		if ref, ok := n["$ref"].(string); ok {
			n, _ = c.root["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		return n
	}
	for _, seg := range p {
		node = deref(node)
		if node == nil {
			return nil
		}
		switch s := seg.(type) {
		case string:
			props, _ := node["properties"].(map[string]any)
			node, _ = props[s].(map[string]any)
		case int:
			node, _ = node["items"].(map[string]any)
		}
		if node == nil {
			return nil
		}
	}
	return node
}
