package hostile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"rig/genrecord"
	"rig/internal/gguf"
)

var update = flag.Bool("update", false, "rewrite testdata/hostile from the generator (go generate ./internal/hostile)")

// maxCaseBytes and maxCorpusBytes keep the committed corpus small: no case
// needs to be big to be hostile (every count is checked before it sizes
// anything), and the repository should not grow by megabytes.
const (
	maxCaseBytes   = 200 << 10
	maxCorpusBytes = 2 << 20
)

// candidates are every file the generator proposes, by path relative to
// testdata/hostile ("designs/x.json", "valid/gguf/y.gguf"). A hostile
// candidate the parser accepts is not written (a valid file has no place in
// the hostile corpus); every valid one is.
type candidates map[string][]byte

func (c candidates) add(kind, name string, data []byte) {
	rel := kind + "/" + name
	if _, dup := c[rel]; dup {
		panic("generator: two candidates named " + rel)
	}
	c[rel] = data
}

// generatedList names the hostile cases that are binary: GGUF files and the
// text files given NUL bytes. Binary files are not committed: the list is,
// and materialize writes each listed case (and every binary valid one) from
// the generator, into <kind>/generated/ and valid/gguf/ where git ignores
// them, before the tests read the corpus.
const generatedList = "generated.list"

// binaryCase reports whether a case is kept out of git.
func binaryCase(rel string, data []byte) bool {
	return strings.HasSuffix(rel, ".gguf") || bytes.IndexByte(data, 0) >= 0
}

var materialized struct {
	sync.Once
	err error
}

// materialize writes the binary cases into testdata/hostile, once per test
// process, replacing whatever was there.
func materialize(t testing.TB) {
	t.Helper()
	materialized.Do(func() { materialized.err = writeGenerated(generate(t)) })
	if materialized.err != nil {
		t.Fatal(materialized.err)
	}
}

func writeGenerated(c candidates) error {
	list, err := os.ReadFile(filepath.Join(corpusDir, generatedList))
	if err != nil {
		return fmt.Errorf("the committed list of binary cases: %w (go generate ./internal/hostile)", err)
	}
	rels := strings.Fields(string(list))
	for rel, data := range c {
		if strings.HasPrefix(rel, "valid/") && binaryCase(rel, data) {
			rels = append(rels, rel)
		}
	}
	dirs := []string{"valid/" + kindGGUF}
	for _, k := range kinds {
		dirs = append(dirs, k+"/generated")
	}
	for _, dir := range dirs {
		if err := os.RemoveAll(filepath.Join(corpusDir, dir)); err != nil {
			return err
		}
	}
	for _, rel := range rels {
		data, ok := c[rel]
		if !ok {
			return fmt.Errorf("%s names %s, which the generator no longer makes (go generate ./internal/hostile)", generatedList, rel)
		}
		path := filepath.Join(corpusDir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generate is the whole corpus, deterministic: the same bytes on every run.
func generate(t testing.TB) candidates {
	c := candidates{}
	genGGUF(t, c)
	genDesigns(t, c)
	genRegistries(t, c)
	genBanks(t, c)
	genRecords(t, c)
	genGovernor(c)
	genPolicies(c)
	// Binary hostile cases live in <kind>/generated/, which git ignores.
	var binary []string
	for rel, data := range c {
		if !strings.HasPrefix(rel, "valid/") && binaryCase(rel, data) {
			binary = append(binary, rel)
		}
	}
	for _, rel := range binary {
		kind, name, _ := strings.Cut(rel, "/")
		c[kind+"/generated/"+name] = c[rel]
		delete(c, rel)
	}
	return c
}

// TestCorpusIsGenerated keeps the committed corpus and its generator in
// step: every committed file is byte for byte what the generator makes
// under that name, so no case is hand-edited out of reach of regeneration.
// With -update it rewrites the corpus, keeping only the hostile candidates
// their parser refuses.
func TestCorpusIsGenerated(t *testing.T) {
	c := generate(t)
	if *update {
		writeCorpus(t, c)
	} else {
		materialize(t)
	}
	var total int64
	n := 0
	err := filepath.WalkDir(corpusDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "README.md" || d.Name() == generatedList {
			return err
		}
		rel, _ := filepath.Rel(corpusDir, path)
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		want, ok := c[rel]
		switch {
		case !ok:
			t.Errorf("%s is committed but the generator makes no such file (go generate ./internal/hostile)", rel)
		case !bytes.Equal(data, want):
			t.Errorf("%s differs from what the generator makes (go generate ./internal/hostile)", rel)
		}
		if len(data) > maxCaseBytes {
			t.Errorf("%s is %d bytes, over the %d a case may be", rel, len(data), maxCaseBytes)
		}
		total += int64(len(data))
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range c {
		if strings.HasPrefix(rel, "valid/") && !exists(filepath.Join(corpusDir, rel)) {
			t.Errorf("valid file %s is not committed", rel)
		}
	}
	if total > maxCorpusBytes {
		t.Errorf("corpus is %d bytes, over %d", total, maxCorpusBytes)
	}
	if n < 300 {
		t.Errorf("corpus has %d files, want at least 300", n)
	}
	t.Logf("%d files, %d bytes", n, total)
}

// writeCorpus replaces testdata/hostile with the candidates, then removes
// each hostile one its parser accepts. Valid files go first: designs read
// the valid models.
func writeCorpus(t *testing.T, c candidates) {
	for _, k := range kinds {
		if err := os.RemoveAll(filepath.Join(corpusDir, k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(corpusDir, "valid")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for rel := range c {
		names = append(names, rel)
	}
	sort.Strings(names)
	for _, rel := range names {
		path := filepath.Join(corpusDir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, c[rel], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kept, dropped := 0, 0
	for _, rel := range names {
		kind, _, _ := strings.Cut(rel, "/")
		if kind == "valid" {
			continue
		}
		path := filepath.Join(corpusDir, rel)
		if open(kind, path) == nil {
			os.Remove(path)
			delete(c, rel)
			dropped++
			continue
		}
		kept++
	}
	var generated []string
	for _, rel := range names {
		if _, ok := c[rel]; ok && strings.Contains(rel, "/generated/") {
			generated = append(generated, rel)
		}
	}
	if err := os.WriteFile(filepath.Join(corpusDir, generatedList), []byte(strings.Join(generated, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("kept %d hostile candidates, dropped %d the parsers accept; %s names the %d binary ones, which git ignores", kept, dropped, generatedList, len(generated))
}

// --- shared mutation machinery -------------------------------------------

// jsonPaths lists every value in a decoded JSON document as a path of keys
// and indices, depth first, in a fixed order.
func jsonPaths(v any, prefix []any, out *[][]any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(append([]any{}, prefix...), k)
			*out = append(*out, p)
			jsonPaths(x[k], p, out)
		}
	case []any:
		for i := range x {
			p := append(append([]any{}, prefix...), i)
			*out = append(*out, p)
			jsonPaths(x[i], p, out)
		}
	}
}

func deepCopy(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// setPath replaces (or, with del, removes) the value at path in a copy of v.
func setPath(v any, path []any, val any, del bool) any {
	root := deepCopy(v)
	cur := root
	for i, step := range path {
		last := i == len(path)-1
		switch x := cur.(type) {
		case map[string]any:
			k := step.(string)
			if last {
				if del {
					delete(x, k)
				} else {
					x[k] = val
				}
				return root
			}
			cur = x[k]
		case []any:
			j := step.(int)
			if last {
				x[j] = val // callers never delete an element (see skipDelete)
				return root
			}
			cur = x[j]
		}
	}
	return root
}

func getPath(v any, path []any) any {
	cur := v
	for _, step := range path {
		switch x := cur.(type) {
		case map[string]any:
			cur = x[step.(string)]
		case []any:
			cur = x[step.(int)]
		}
	}
	return cur
}

func pathName(path []any) string {
	var b strings.Builder
	for _, s := range path {
		switch x := s.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			for _, r := range x {
				if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
					b.WriteRune(r)
				}
			}
		case int:
			fmt.Fprintf(&b, "%d", x)
		}
	}
	return b.String()
}

// typeMutations are what a hand-edited file gets wrong about one value:
// its type, its sign, its size, or its presence.
func typeMutations(orig any) []struct {
	tag string
	val any
	del bool
} {
	type m = struct {
		tag string
		val any
		del bool
	}
	out := []m{{"missing", nil, true}, {"null", nil, false}}
	switch x := orig.(type) {
	case string:
		out = append(out, m{"number", 7, false}, m{"empty", "", false}, m{"nul", "a\x00b", false},
			m{"dotdot", "../../../../../../etc/passwd", false})
	case float64:
		out = append(out, m{"string", fmt.Sprint(x), false}, m{"negative", -1 - x, false}, m{"huge", 1e308, false},
			m{"fraction", x + 0.5, false}, m{"maxint", float64(math.MaxInt64), false})
	case bool:
		out = append(out, m{"string", "yes", false}, m{"number", 1, false})
	case map[string]any:
		out = append(out, m{"array", []any{}, false}, m{"string", "{}", false}, m{"unknownkey", withKey(x, "surplus_field", 1), false})
	case []any:
		out = append(out, m{"object", map[string]any{}, false}, m{"empty", []any{}, false}, m{"string", "[]", false})
	}
	return out
}

// skipDelete: removing an array element is only a shorter array, which
// the other mutations cover; only an object's key is deleted.
func skipDelete(p []any, del bool) bool {
	_, idx := p[len(p)-1].(int)
	return del && idx
}

func withKey(x map[string]any, k string, v any) map[string]any {
	c := deepCopy(x).(map[string]any)
	c[k] = v
	return c
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// mutateJSON adds, under kind, one candidate per mutation of every value in
// base whose path passes keep, at most limit of them, then the byte-level
// cases every JSON file gets.
func mutateJSON(c candidates, kind, prefix, ext string, base any, keep func([]any) bool, limit int) {
	var paths [][]any
	jsonPaths(base, nil, &paths)
	seen := map[string]bool{}
	n := 0
	for _, p := range paths {
		if !keep(p) {
			continue
		}
		for _, m := range typeMutations(getPath(base, p)) {
			if n >= limit {
				break
			}
			if skipDelete(p, m.del) {
				continue
			}
			name := fmt.Sprintf("%s-%s-%s%s", prefix, pathName(p), m.tag, ext)
			if seen[name] {
				continue
			}
			seen[name] = true
			c.add(kind, name, mustJSON(setPath(base, p, m.val, m.del)))
			n++
		}
	}
	byteCases(c, kind, prefix, ext, mustJSON(base))
}

// byteCases are the file-level accidents: empty, truncated, BOM, NUL,
// invalid UTF-8, duplicate keys, trailing data, deep nesting, wrong top type.
func byteCases(c candidates, kind, prefix, ext string, good []byte) {
	c.add(kind, prefix+"-empty"+ext, nil)
	c.add(kind, prefix+"-whitespace"+ext, []byte(" \n\t\n"))
	for _, frac := range []int{1, 3, 5, 7, 9} {
		c.add(kind, fmt.Sprintf("%s-truncated-%d0pct%s", prefix, frac, ext), good[:len(good)*frac/10])
	}
	c.add(kind, prefix+"-bom"+ext, append([]byte("\xef\xbb\xbf"), good...))
	c.add(kind, prefix+"-nul-byte"+ext, bytes.Replace(good, []byte("\""), []byte("\"\x00"), 3))
	c.add(kind, prefix+"-invalid-utf8"+ext, bytes.Replace(good, []byte("\""), []byte("\"\xff\xfe"), 3))
	c.add(kind, prefix+"-overlong-utf8"+ext, bytes.Replace(good, []byte("\""), []byte("\"\xc0\xaf"), 3))
	c.add(kind, prefix+"-surrogate-utf8"+ext, bytes.Replace(good, []byte("\""), []byte("\"\xed\xa0\x80"), 3))
	c.add(kind, prefix+"-trailing-object"+ext, append(append([]byte{}, good...), []byte("{}\n")...))
	c.add(kind, prefix+"-trailing-garbage"+ext, append(append([]byte{}, good...), []byte("\x00\x01garbage")...))
	c.add(kind, prefix+"-top-array"+ext, []byte("[]\n"))
	c.add(kind, prefix+"-top-null"+ext, []byte("null\n"))
	c.add(kind, prefix+"-top-string"+ext, []byte("\"a\"\n"))
	c.add(kind, prefix+"-top-number"+ext, []byte("1e999999\n"))
	c.add(kind, prefix+"-deep-arrays"+ext, []byte(strings.Repeat("[", 10001)+strings.Repeat("]", 10001)))
	c.add(kind, prefix+"-deep-objects"+ext, []byte(strings.Repeat(`{"a":`, 3000)+"1"+strings.Repeat("}", 3000)))
	c.add(kind, prefix+"-unterminated-string"+ext, []byte(`{"`+strings.Repeat("a", 20000)))
	// The same key twice: the second would silently win in a lax decoder.
	if i := bytes.IndexByte(good, '{'); i >= 0 {
		c.add(kind, prefix+"-duplicate-key"+ext, dupFirstKey(good))
	}
}

// dupFirstKey writes the document's first key/value pair twice.
func dupFirstKey(good []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(good, &m) != nil {
		return append([]byte(`{"a":1,"a":2}`), good...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString("{")
	fmt.Fprintf(&b, "%q: %s,\n", keys[0], []byte(`"shadowed"`))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "%q: %s", k, m[k])
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func readJSON(t testing.TB, path string) any {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// --- designs ---------------------------------------------------------------

// demoForCorpus is the demo design as a file in testdata/hostile/designs
// would write it: the bundled banks relative to that folder.
// Only the extract-json job kind on llama-server is kept (as
// studytest.JudgedStudyDesign does), so each case stays a few kilobytes.
func demoForCorpus(t testing.TB) map[string]any {
	d := readJSON(t, "../../examples/demo-study/design.json").(map[string]any)
	jk := d["job_kinds"].([]any)[0].(map[string]any)
	jk["task_bank"] = "../../../tasks/banks/" + filepath.Base(jk["task_bank"].(string))
	d["job_kinds"] = []any{jk}
	var arms []any
	for _, a := range d["arms"].([]any) {
		if am := a.(map[string]any); am["runtime"] == "llama-server" {
			arms = append(arms, am)
		}
	}
	d["arms"] = arms
	var items []any
	for _, it := range d["items"].([]any) {
		switch it.(map[string]any)["registry_id"] {
		case "aider-chat", "rig-bank-fix-test", "ollama":
		default:
			items = append(items, it)
		}
	}
	d["items"] = items
	return d
}

func genDesigns(t testing.TB, c candidates) {
	base := demoForCorpus(t)
	// The valid copy is one folder deeper, so its bank is one more ".." up.
	valid := deepCopy(base).(map[string]any)
	jk := valid["job_kinds"].([]any)[0].(map[string]any)
	jk["task_bank"] = "../" + jk["task_bank"].(string)
	c.add("valid/"+kindDesigns, "demo.json", mustJSON(valid))
	// Every value of the first job kind, the first arm and the top level;
	// the other job kinds and arms repeat the same shapes.
	keep := func(p []any) bool {
		if len(p) >= 2 {
			if i, ok := p[1].(int); ok && i > 0 {
				return false
			}
		}
		if len(p) >= 1 && p[0] == "sentences" && len(p) > 1 {
			return false
		}
		return true
	}
	mutateJSON(c, kindDesigns, "design", ".json", base, keep, 90)
	for name, s := range map[string]string{
		"bank-outside.json":         strings.Replace(string(mustJSON(base)), "../../../tasks/banks/extract-json.jsonl", "../../../../../../etc/passwd", 1),
		"bank-symlink-name.json":    strings.Replace(string(mustJSON(base)), "../../../tasks/banks/extract-json.jsonl", "/proc/self/root/etc/passwd", 1),
		"bank-is-directory.json":    strings.Replace(string(mustJSON(base)), "../../../tasks/banks/extract-json.jsonl", "../../../tasks/banks", 1),
		"bank-is-dev-zero.json":     strings.Replace(string(mustJSON(base)), "../../../tasks/banks/extract-json.jsonl", "/dev/zero", 1),
		"registry-outside.json":     strings.Replace(string(mustJSON(base)), `"name": "demo-small-models"`, `"name": "demo-small-models", "licence_registry": "../../../../../../etc/passwd"`, 1),
		"registry-dev-zero.json":    strings.Replace(string(mustJSON(base)), `"name": "demo-small-models"`, `"name": "demo-small-models", "licence_registry": "/dev/zero", "allow_paths_outside": true`, 1),
		"model-unset-variable.json": strings.Replace(string(mustJSON(base)), "${SMOLLM2_GGUF}", "${NO_SUCH_VARIABLE}", 1),
		"model-dev-zero.json":       strings.Replace(string(mustJSON(base)), "${SMOLLM2_GGUF}", "/dev/zero", 1),
		"name-dotdot.json":          strings.Replace(string(mustJSON(base)), `"demo-small-models"`, `"../../escape"`, 1),
		"name-slash.json":           strings.Replace(string(mustJSON(base)), `"demo-small-models"`, `"a/b"`, 1),
		"name-nul.json":             strings.Replace(string(mustJSON(base)), `"demo-small-models"`, `"demo\u0000x"`, 1),
	} {
		c.add(kindDesigns, name, []byte(s))
	}
	// YAML: the same design as YAML accidents, and alias bombs.
	c.add(kindDesigns, "yaml-billion-laughs.yaml", []byte(billionLaughs()))
	c.add(kindDesigns, "yaml-tab-indent.yaml", []byte("name: x\n\trepeats: 1\n"))
	c.add(kindDesigns, "yaml-repeats-hex-huge.yaml", []byte("name: x\nrepeats: 0xffffffffffffffffff\n"))
	c.add(kindDesigns, "yaml-top-inf.yaml", []byte("name: x\ntop_k: .inf\n"))
	c.add(kindDesigns, "yaml-anchor-loop.yaml", []byte("a: &x [*x]\n"))
	c.add(kindDesigns, "yaml-duplicate-key.yaml", []byte("name: a\nname: b\nrepeats: 1\n"))
	c.add(kindDesigns, "yaml-invalid-utf8.yaml", []byte("name: x\nrepeats: 1\nsentences: \xff\n"))
	c.add(kindDesigns, "yaml-empty.yaml", nil)
	c.add(kindDesigns, "yaml-bom-only.yaml", []byte("\xef\xbb\xbf"))
	c.add(kindDesigns, "yaml-deep-flow.yaml", []byte(strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+"\n"))
	c.add(kindDesigns, "yaml-multi-document.yaml", []byte("name: a\n---\nname: b\n"))
	c.add(kindDesigns, "yaml-binary-tag.yaml", []byte("name: !!binary AAEC\n"))
	// Found by FuzzParseDesign (studies/testdata/fuzz): an empty key.
	c.add(kindDesigns, "fuzz-empty-key.json", []byte(`{"":0}`))
}

// billionLaughs is nine levels of aliases, each naming the last ten times:
// 10^9 strings if a decoder expanded them all.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("name: *a8\n")
	return b.String()
}

// --- licence registries ----------------------------------------------------

func genRegistries(t testing.TB, c candidates) {
	base := readJSON(t, "../../licences/registry.json").(map[string]any)
	// One entry is enough to carry every shape; keep the file small.
	base["entries"] = base["entries"].([]any)[:1]
	c.add("valid/"+kindRegistries, "one-entry.json", mustJSON(base))
	mutateJSON(c, kindRegistries, "registry", ".json", base, func([]any) bool { return true }, 70)
	dup := deepCopy(base).(map[string]any)
	dup["entries"] = append(dup["entries"].([]any), dup["entries"].([]any)[0])
	c.add(kindRegistries, "registry-duplicate-id.json", mustJSON(dup))
	future := setPath(base, []any{"entries", 0, "date_read"}, "2999-01-01", false)
	c.add(kindRegistries, "registry-date-read-future.json", mustJSON(future))
	c.add(kindRegistries, "registry-date-read-feb30.json", mustJSON(setPath(base, []any{"entries", 0, "date_read"}, "2026-02-30", false)))
	c.add(kindRegistries, "registry-id-uppercase.json", mustJSON(setPath(base, []any{"entries", 0, "id"}, "Model-A", false)))
	c.add(kindRegistries, "registry-id-dotdot.json", mustJSON(setPath(base, []any{"entries", 0, "id"}, "../x", false)))
	c.add(kindRegistries, "registry-verdict-unknown.json", mustJSON(setPath(base, []any{"entries", 0, "verdicts", "inference", "verdict"}, "maybe", false)))
	c.add(kindRegistries, "registry-use-unknown.json", mustJSON(setPath(base, []any{"entries", 0, "verdicts", "juggling"}, map[string]any{"verdict": "allowed", "reading": "x"}, false)))
	c.add(kindRegistries, "registry-kind-unknown.json", mustJSON(setPath(base, []any{"entries", 0, "kind"}, "spaceship", false)))
	c.add(kindRegistries, "registry-schema-99.json", mustJSON(setPath(base, []any{"schema_version"}, 99, false)))
}

// --- task banks ----------------------------------------------------------

func bankBase(t testing.TB) []map[string]any {
	data, err := os.ReadFile("../../tasks/banks/extract-json.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.SplitN(string(data), "\n", 4)[:3] {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func jsonl(lines []any) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		line, err := json.Marshal(l)
		if err != nil {
			panic(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func genBanks(t testing.TB, c candidates) {
	lines := bankBase(t)
	var base []any
	for _, l := range lines {
		base = append(base, l)
	}
	good := jsonl(base)
	c.add("valid/"+kindBanks, "three-lines.jsonl", good)
	// Each value of the header and of the first task, mutated in place.
	n := 0
	for li := 0; li < 2; li++ {
		var paths [][]any
		jsonPaths(base[li], nil, &paths)
		for _, p := range paths {
			for _, m := range typeMutations(getPath(base[li], p)) {
				if n >= 105 { // every mutation of the header (completion block included) and of the first task
					break
				}
				if skipDelete(p, m.del) {
					continue
				}
				doc := append([]any{}, base...)
				doc[li] = setPath(base[li], p, m.val, m.del)
				c.add(kindBanks, fmt.Sprintf("bank-line%d-%s-%s.jsonl", li+1, pathName(p), m.tag), jsonl(doc))
				n++
			}
		}
	}
	byteCases(c, kindBanks, "bank", ".jsonl", good)
	ls := strings.Split(strings.TrimSuffix(string(good), "\n"), "\n")
	c.add(kindBanks, "bank-duplicate-task.jsonl", []byte(ls[0]+"\n"+ls[1]+"\n"+ls[1]+"\n"))
	c.add(kindBanks, "bank-no-header.jsonl", []byte(ls[1]+"\n"+ls[2]+"\n"))
	c.add(kindBanks, "bank-header-only-twice.jsonl", []byte(ls[0]+"\n"+ls[0]+"\n"))
	c.add(kindBanks, "bank-blank-line-between.jsonl", []byte(ls[0]+"\n\n"+ls[1]+"\n"))
	c.add(kindBanks, "bank-crlf-torn.jsonl", []byte(ls[0]+"\r\n"+ls[1][:len(ls[1])/2]))
	c.add(kindBanks, "bank-long-line.jsonl", []byte(ls[0]+"\n{\"id\":\""+strings.Repeat("a", 190<<10)+"\"}\n"))
	c.add(kindBanks, "bank-many-empty-objects.jsonl", []byte(ls[0]+"\n"+strings.Repeat("{}\n", 20000)))
	c.add(kindBanks, "bank-nul-line.jsonl", []byte(ls[0]+"\n\x00\x00\x00\n"))
}

// --- generation records ------------------------------------------------------

func recordPins() genrecord.Pins {
	return genrecord.Pins{
		ModelSHA256: strings.Repeat("a", 64), ModelName: "smollm2-135m-instruct-q4_1", Runtime: "llama-server",
		RuntimeVersion: "b6500", BinarySHA256: strings.Repeat("b", 64), Libraries: map[string]string{"/opt/rig/lib/libllama.so": strings.Repeat("c", 64)},
		BuildFlags: "-DGGML_CUDA=OFF", MachineLine: "corpus host, 2 cpu", DesignHash: strings.Repeat("e", 64), StudyID: "s1", ExecutionID: "x1",
	}
}

// goodRecordFile writes a two-row record through the real writer.
func goodRecordFile(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	w, err := genrecord.OpenWriter(path, recordPins())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		var out []genrecord.Step
		for s := 0; s < 3; s++ {
			id := 10 + s
			lp := -0.1 * float64(s+1)
			var top []genrecord.Alt
			for k := 0; k < genrecord.DefaultK; k++ {
				tid := id + k
				top = append(top, genrecord.Alt{ID: &tid, Text: fmt.Sprintf("t%d", tid), Logprob: lp - float64(k)})
			}
			out = append(out, genrecord.Step{ID: &id, Text: fmt.Sprintf("t%d", id), Logprob: &lp, Top: top})
		}
		row := genrecord.Row{Kind: genrecord.KindRow, RowID: fmt.Sprintf("r%04d", i), Arm: "smollm2", Prompt: fmt.Sprintf("call-%d", i),
			Role: genrecord.RoleCandidate, RenderedPrompt: "<|im_start|>user\nhi<|im_end|>\n", PromptTokenIDs: []int{1, 2, 3},
			Output: out, K: genrecord.DefaultK, Sampling: genrecord.Sampling{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42},
			StopReason: genrecord.StopLength, RuntimeTokenCount: 3, WallMS: 10}
		if err := w.Append(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func genRecords(t testing.TB, c candidates) {
	good := goodRecordFile(t)
	c.add("valid/"+kindGenRecords, "two-rows.jsonl", good)
	var lines []any
	for _, l := range strings.Split(strings.TrimSuffix(string(good), "\n"), "\n") {
		var m any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	n := 0
	for li := 0; li < 2; li++ {
		var paths [][]any
		jsonPaths(lines[li], nil, &paths)
		for _, p := range paths {
			// Top-K alternatives repeat one shape; the first is enough.
			if ps := pathName(p); strings.Contains(ps, "top1") || strings.Contains(ps, "top2") || strings.Contains(ps, "top3") || strings.Contains(ps, "top4") || strings.Contains(ps, "output1") || strings.Contains(ps, "output2") {
				continue
			}
			for _, m := range typeMutations(getPath(lines[li], p)) {
				if n >= 80 {
					break
				}
				if skipDelete(p, m.del) {
					continue
				}
				doc := append([]any{}, lines...)
				doc[li] = setPath(lines[li], p, m.val, m.del)
				c.add(kindGenRecords, fmt.Sprintf("gen-line%d-%s-%s.jsonl", li+1, pathName(p), m.tag), jsonl(doc))
				n++
			}
		}
	}
	byteCases(c, kindGenRecords, "gen", ".jsonl", good)
	ls := strings.Split(strings.TrimSuffix(string(good), "\n"), "\n")
	c.add(kindGenRecords, "gen-torn-last-line.jsonl", []byte(ls[0]+"\n"+ls[1]+"\n"+ls[2][:len(ls[2])/2]))
	c.add(kindGenRecords, "gen-duplicate-row.jsonl", []byte(ls[0]+"\n"+ls[1]+"\n"+ls[1]+"\n"))
	c.add(kindGenRecords, "gen-two-headers.jsonl", []byte(ls[0]+"\n"+ls[0]+"\n"+ls[1]+"\n"))
	c.add(kindGenRecords, "gen-rows-only.jsonl", []byte(ls[1]+"\n"+ls[2]+"\n"))
}

// --- governor.json --------------------------------------------------------

func genGovernor(c candidates) {
	base := map[string]any{
		"poll_ms": 250.0, "heartbeat_ms": 1000.0, "grace_ms": 5000.0, "read_timeout_ms": 200.0,
		"policies": map[string]any{
			"over-temperature": map[string]any{"limit": 80.0, "band": 3.0, "shutdown": 90.0},
			"low-disk":         map[string]any{"enabled": true, "limit": 2.0},
		},
	}
	c.add("valid/"+kindGovernor, "governor.json", mustJSON(base))
	mutateJSON(c, kindGovernor, "governor", ".json", base, func([]any) bool { return true }, 50)
	c.add(kindGovernor, "governor-unknown-policy.json", []byte(`{"policies":{"warp-core-breach":{"limit":1}}}`))
	c.add(kindGovernor, "governor-poll-zero.json", []byte(`{"poll_ms":0}`))
	c.add(kindGovernor, "governor-poll-nan.json", []byte(`{"poll_ms":NaN}`))
	c.add(kindGovernor, "governor-shutdown-below-limit.json", []byte(`{"policies":{"over-temperature":{"limit":90,"shutdown":80}}}`))
	c.add(kindGovernor, "governor-clear-after-huge.json", []byte(`{"policies":{"cgroup-oom":{"clear_after_s":1e308}}}`))
}

// --- the daemon's policy file -----------------------------------------------

func genPolicies(c candidates) {
	base := map[string]any{
		"schema_version": 1.0,
		"grants": []any{
			map[string]any{"user": "rita", "roles": []any{"reviewer"}},
			map[string]any{"group": "root", "roles": []any{"staff", "operator"}},
			map[string]any{"user": "dana", "roles": []any{"director"}},
		},
	}
	c.add("valid/"+kindPolicies, "policy.json", mustJSON(base))
	mutateJSON(c, kindPolicies, "policy", ".json", base, func([]any) bool { return true }, 40)
	c.add(kindPolicies, "policy-unknown-role.json", []byte(`{"schema_version":1,"grants":[{"user":"a","roles":["root"]}]}`))
	c.add(kindPolicies, "policy-user-and-group.json", []byte(`{"schema_version":1,"grants":[{"user":"a","group":"b","roles":["staff"]}]}`))
	c.add(kindPolicies, "policy-nobody.json", []byte(`{"schema_version":1,"grants":[{"roles":["director"]}]}`))
	c.add(kindPolicies, "policy-no-grants.json", []byte(`{"schema_version":1,"grants":[]}`))
	c.add(kindPolicies, "policy-missing-group.json", []byte(`{"schema_version":1,"socket_group":"no-such-studio-group","grants":[{"user":"a","roles":["staff"]}]}`))
	c.add(kindPolicies, "policy-version-2.json", []byte(`{"schema_version":2,"grants":[{"user":"a","roles":["staff"]}]}`))
	c.add(kindPolicies, "policy-typo-field.json", []byte(`{"schema_version":1,"grant":[{"user":"a","roles":["staff"]}]}`))
	c.add(kindPolicies, "policy-two-values.json", []byte(`{"schema_version":1,"grants":[{"user":"a","roles":["staff"]}]}{}`))
	c.add(kindPolicies, "policy-bad-utf8.json", []byte("{\"schema_version\":1,\"grants\":[{\"user\":\"\xc3\x28\",\"roles\":[\"staff\"]}]}"))
	c.add(kindPolicies, "policy-zero-bytes.json", nil)
	c.add(kindPolicies, "policy-null.json", []byte("null"))
	c.add(kindPolicies, "policy-array.json", []byte(`[{"user":"a","roles":["director"]}]`))
}

// --- GGUF -----------------------------------------------------------------

// ggufMeta is a plausible llama header of a file type; set replaces or adds keys.
func ggufMeta(fileType uint32, set ...gguf.KV) []gguf.KV {
	return gguf.PlausibleMeta("llama", append([]gguf.KV{{Key: "general.file_type", Type: gguf.ValueUint32, Value: fileType}}, set...)...)
}

// ggufModel encodes meta with one small tensor per layer and an embedding.
func ggufModel(t testing.TB, meta []gguf.KV, layers int) []byte {
	var ts []gguf.Tensor
	for l := 0; l < layers; l++ {
		ts = append(ts, gguf.Tensor{Info: gguf.TensorInfo{Name: fmt.Sprintf("blk.%d.attn_q.weight", l), Dims: []uint64{32, 1}, Type: gguf.TypeQ8_0}, Data: make([]byte, 34)})
	}
	ts = append(ts, gguf.Tensor{Info: gguf.TensorInfo{Name: "token_embd.weight", Dims: []uint64{32, 8}, Type: gguf.TypeF16}, Data: make([]byte, 32*8*2)})
	var buf bytes.Buffer
	if err := gguf.Encode(&buf, meta, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// manyTensors is the biggest valid header in the corpus
// (valid/gguf/many-tensors.gguf), the one BenchmarkPreflightCorpus times.
func manyTensors(t testing.TB) []byte {
	b, err := gguf.LargeHeader()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawHeader is a GGUF header written by hand: the counts a real encoder
// would never write.
func rawHeader(magic string, version uint32, tensors, kvs uint64, rest ...[]byte) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	binary.Write(&b, binary.LittleEndian, version)
	binary.Write(&b, binary.LittleEndian, tensors)
	binary.Write(&b, binary.LittleEndian, kvs)
	for _, r := range rest {
		b.Write(r)
	}
	return b.Bytes()
}

func le(vs ...any) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		switch x := v.(type) {
		case string:
			binary.Write(&b, binary.LittleEndian, uint64(len(x)))
			b.WriteString(x)
		default:
			binary.Write(&b, binary.LittleEndian, x)
		}
	}
	return b.Bytes()
}

func genGGUF(t testing.TB, c candidates) {
	// The SmolLM2 stand-ins carry a chat template as the instruction-tuned
	// file does, so the valid designs' chat arms pass the base-model check;
	// the Gemma one carries none, as the provisioned base model.
	chat := gguf.KV{Key: "tokenizer.chat_template", Type: gguf.ValueString, Value: "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}
	c.add("valid/"+kindGGUF, "smollm2-q4_1.gguf", ggufModel(t, ggufMeta(3, chat), 4))
	c.add("valid/"+kindGGUF, "gemma3-q4_k_m.gguf", ggufModel(t, ggufMeta(15), 4))
	c.add("valid/"+kindGGUF, "smollm2-q8_0.gguf", ggufModel(t, ggufMeta(7, chat), 4))
	c.add("valid/"+kindGGUF, "many-tensors.gguf", manyTensors(t))
	good := ggufModel(t, ggufMeta(7), 4)
	// Truncated at every 24th byte of the header and a few in the data.
	for off := 0; off < len(good); off += 24 {
		c.add(kindGGUF, fmt.Sprintf("truncated-at-%04d.gguf", off), good[:off])
	}
	// A run of 0xff written over the header at each 8-byte step: counts,
	// lengths and types become absurd in turn.
	for off := 4; off < 320 && off < len(good); off += 8 {
		b := append([]byte{}, good...)
		copy(b[off:], bytes.Repeat([]byte{0xff}, 8))
		c.add(kindGGUF, fmt.Sprintf("ff-at-%04d.gguf", off), b)
	}
	u32, u64 := gguf.ValueUint32, gguf.ValueUint64
	for name, data := range map[string][]byte{
		"magic-wrong.gguf":          rawHeader("GGUX", 3, 0, 0),
		"magic-ggml.gguf":           rawHeader("ggml", 3, 0, 0),
		"version-0.gguf":            rawHeader("GGUF", 0, 0, 0),
		"version-99.gguf":           rawHeader("GGUF", 99, 0, 0),
		"version-big-endian.gguf":   rawHeader("GGUF", 0x03000000, 0, 0),
		"tensors-2e63.gguf":         rawHeader("GGUF", 3, 1<<63, 0),
		"tensors-max.gguf":          rawHeader("GGUF", 3, math.MaxUint64, 0),
		"kvs-max.gguf":              rawHeader("GGUF", 3, 0, math.MaxUint64),
		"kvs-1e9-empty.gguf":        rawHeader("GGUF", 3, 0, 1e9),
		"key-length-huge.gguf":      rawHeader("GGUF", 3, 0, 1, le(uint64(1<<62))),
		"key-length-past-end.gguf":  rawHeader("GGUF", 3, 0, 1, le(uint64(1000), "abc")),
		"value-type-unknown.gguf":   rawHeader("GGUF", 3, 0, 1, le("general.architecture", uint32(99))),
		"string-length-huge.gguf":   rawHeader("GGUF", 3, 0, 1, le("general.architecture", uint32(8), uint64(1<<60))),
		"array-length-huge.gguf":    rawHeader("GGUF", 3, 0, 1, le("tokenizer.ggml.tokens", uint32(9), uint32(8), uint64(1<<61))),
		"array-of-arrays.gguf":      rawHeader("GGUF", 3, 0, 1, le("a", uint32(9), uint32(9), uint64(1<<40))),
		"array-elem-type-bad.gguf":  rawHeader("GGUF", 3, 0, 1, le("a", uint32(9), uint32(77), uint64(3))),
		"only-magic.gguf":           []byte("GGUF"),
		"empty.gguf":                nil,
		"all-zero-4k.gguf":          make([]byte, 4096),
		"all-ff-4k.gguf":            bytes.Repeat([]byte{0xff}, 4096),
		"text-file.gguf":            []byte("this is not a model\n"),
		"tensor-dims-huge.gguf":     rawHeader("GGUF", 3, 1, 0, le("w", uint32(1<<30))),
		"tensor-dims-5.gguf":        rawHeader("GGUF", 3, 1, 0, le("w", uint32(5), uint64(1), uint64(1), uint64(1), uint64(1), uint64(1), uint32(0), uint64(0))),
		"tensor-type-unknown.gguf":  rawHeader("GGUF", 3, 1, 0, le("w", uint32(1), uint64(32), uint32(200), uint64(0))),
		"tensor-dim-overflow.gguf":  rawHeader("GGUF", 3, 1, 0, le("w", uint32(2), uint64(1<<40), uint64(1<<40), uint32(0), uint64(0))),
		"tensor-offset-past.gguf":   rawHeader("GGUF", 3, 1, 0, le("w", uint32(1), uint64(32), uint32(0), uint64(1<<50))),
		"tensor-name-huge.gguf":     rawHeader("GGUF", 3, 1, 0, le(uint64(1<<62))),
		"alignment-zero.gguf":       ggufModel(t, ggufMeta(7, gguf.KV{Key: "general.alignment", Type: u32, Value: uint32(0)}), 4),
		"alignment-odd.gguf":        ggufModel(t, ggufMeta(7, gguf.KV{Key: "general.alignment", Type: u32, Value: uint32(3)}), 4),
		"layers-max.gguf":           ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.block_count", Type: u32, Value: uint32(math.MaxUint32)}), 4),
		"layers-zero.gguf":          ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.block_count", Type: u32, Value: uint32(0)}), 4),
		"heads-zero.gguf":           ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.attention.head_count", Type: u32, Value: uint32(0)}), 4),
		"kv-heads-over-heads.gguf":  ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.attention.head_count_kv", Type: u32, Value: uint32(64)}), 4),
		"embd-max.gguf":             ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.embedding_length", Type: u64, Value: uint64(math.MaxUint64)}), 4),
		"embd-zero.gguf":            ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.embedding_length", Type: u32, Value: uint32(0)}), 4),
		"context-max.gguf":          ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.context_length", Type: u64, Value: uint64(math.MaxUint64)}), 4),
		"ff-max.gguf":               ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.feed_forward_length", Type: u64, Value: uint64(1 << 62)}), 4),
		"arch-missing.gguf":         ggufModel(t, ggufMeta(7)[1:], 4),
		"arch-unmodelled.gguf":      ggufModel(t, ggufMeta(7, gguf.KV{Key: "general.architecture", Type: gguf.ValueString, Value: "rwkv6"}), 4),
		"arch-wrong-type.gguf":      ggufModel(t, ggufMeta(7, gguf.KV{Key: "general.architecture", Type: u32, Value: uint32(1)}), 4),
		"layers-wrong-type.gguf":    ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.block_count", Type: gguf.ValueString, Value: "four"}), 4),
		"kv-heads-array-short.gguf": ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.attention.head_count_kv", Type: gguf.ValueArray, Value: []uint32{2}}), 4),
		"kv-heads-array-zero.gguf":  ggufModel(t, ggufMeta(7, gguf.KV{Key: "llama.attention.head_count_kv", Type: gguf.ValueArray, Value: []uint32{2, 0, 2, 2}}), 4),
		"duplicate-key.gguf":        ggufModel(t, append(ggufMeta(7), gguf.KV{Key: "llama.block_count", Type: u32, Value: uint32(8)}), 4),
		"key-invalid-utf8.gguf":     ggufModel(t, append(ggufMeta(7), gguf.KV{Key: "llama.\xff\xfe", Type: u32, Value: uint32(1)}), 4),
		"key-empty.gguf":            ggufModel(t, append(ggufMeta(7), gguf.KV{Key: "", Type: u32, Value: uint32(1)}), 4),
		"arch-nul.gguf":             ggufModel(t, ggufMeta(7, gguf.KV{Key: "general.architecture", Type: gguf.ValueString, Value: "lla\x00ma"}), 4),
	} {
		c.add(kindGGUF, name, data)
	}
}
