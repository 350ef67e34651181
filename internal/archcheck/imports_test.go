package archcheck

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "rig/"

// leaves import nothing from rig but internal/.
var leaves = []string{"runtimes", "governor", "preflight", "receipts", "genrecord", "tasks", "licences"}

// notForTheCLI are the runner, the store and the engine: the command line
// reaches them through the daemon's client only.
var notForTheCLI = []string{"run", "receipts", "scaleout"}

// notForTheData are the runner, the statistics, the report, the engine, the
// daemon and the protocol (and the packages below each): studies, the
// study as data, imports none of them, so reading, checking and planning a
// study needs none of them, and what joins a design to one of them (its
// stopping rule to the monitor, its guardrails to the analysis) lives in a
// package that imports both.
var notForTheData = []string{"run", "analysis", "report", "report/findings", "scaleout", "daemon", "api"}

// benchRoom holds every `rig bench …`: only the command line imports a
// bench, so no package of the product links one.
const benchRoom = "bench/"

// goPackages lists the module's packages and their rig imports (code, not
// tests), internal/ left out: the table names the rooms.
func goPackages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		if strings.HasPrefix(name, "internal/") {
			continue
		}
		deps := []string{}
		for _, imp := range p.Imports {
			if dep, ok := strings.CutPrefix(imp, module); ok && !strings.HasPrefix(dep, "internal/") {
				deps = append(deps, dep)
			}
		}
		sort.Strings(deps)
		pkgs[name] = deps
	}
	return pkgs
}

// documentedImports reads the table under "## Imports" in
// docs/architecture.md: | `package` | `dep`, `dep` | (— for none).
func documentedImports(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([^`]+)` \\| (.*) \\|$")
	tick := regexp.MustCompile("`([^`]+)`")
	table := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Imports"
			continue
		}
		m := row.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		deps := []string{}
		for _, d := range tick.FindAllStringSubmatch(m[2], -1) {
			deps = append(deps, d[1])
		}
		sort.Strings(deps)
		table[m[1]] = deps
	}
	if len(table) == 0 {
		t.Fatal(`docs/architecture.md has no "## Imports" table`)
	}
	return table
}

// TestImportTableIsTheCode holds docs/architecture.md's import table to
// the code: every package has its row, and each row names exactly the rig
// packages (internal/ aside) that package imports.
func TestImportTableIsTheCode(t *testing.T) {
	code, doc := goPackages(t), documentedImports(t)
	for name, deps := range code {
		want, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("package %s has no row in docs/architecture.md's import table; add: | `%s` | %s |", name, name, cell(deps))
		case !slices.Equal(want, deps):
			t.Errorf("package %s imports %s; docs/architecture.md's table says %s (redraw the row, or the arrow)", name, cell(deps), cell(want))
		}
	}
	for name := range doc {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/architecture.md's import table names %s, which is no package (remove its row)", name)
		}
	}
}

// TestArrowsPointDown holds the rules for arrows on the code itself.
func TestArrowsPointDown(t *testing.T) {
	code := goPackages(t)
	for _, leaf := range leaves {
		if deps := code[leaf]; len(deps) > 0 {
			t.Errorf("leaf %s imports %s: a leaf imports nothing from rig but internal/", leaf, cell(deps))
		}
	}
	for _, dep := range code["cmd/rig"] {
		if slices.Contains(notForTheCLI, dep) {
			t.Errorf("cmd/rig imports %s: the command line reaches the runner, the store and the engine through the daemon's client", dep)
		}
	}
	for name, deps := range code {
		for _, dep := range deps {
			if strings.HasPrefix(dep, benchRoom) && name != "cmd/rig" {
				t.Errorf("%s imports %s: only cmd/rig imports a bench; move what %s needs out of bench/ into the room it measures", name, dep, name)
			}
		}
	}
	for _, dep := range code["studies"] {
		for _, room := range notForTheData {
			if dep == room || strings.HasPrefix(dep, room+"/") {
				t.Errorf("studies imports %s: the study as data imports none of %s; move the code that needs %s to a package that imports both (run, report/findings or the daemon) and keep in studies only the design's own words", dep, cell(notForTheData), dep)
			}
		}
	}
}

func cell(deps []string) string {
	if len(deps) == 0 {
		return "—"
	}
	var b []string
	for _, d := range deps {
		b = append(b, "`"+d+"`")
	}
	return strings.Join(b, ", ")
}
