package licences

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Role is the part an item plays in a design.
type Role string

// The roles a design item may take.
const (
	RoleWriter    Role = "writer"
	RoleCritic    Role = "critic"
	RoleJudge     Role = "judge"
	RoleGrader    Role = "grader"
	RoleEmbedder  Role = "embedder"
	RoleGenerator Role = "generator"
	RoleCandidate Role = "candidate"
	RoleIncumbent Role = "incumbent"
	RoleTool      Role = "tool"
	RoleRuntime   Role = "runtime"
	RoleDataset   Role = "dataset"
	RoleService   Role = "service"
)

// roleKinds says which entry kinds can stand behind a role, so a runtime's
// entry cannot vouch for a model by a mistyped id. Tool and runtime back each
// other because a harness such as Aider is listed as either.
var roleKinds = map[Role][]Kind{
	RoleWriter:    {KindModel, KindService},
	RoleCritic:    {KindModel, KindService},
	RoleCandidate: {KindModel, KindService},
	RoleIncumbent: {KindModel, KindService},
	RoleEmbedder:  {KindModel, KindService},
	RoleGenerator: {KindModel, KindService},
	RoleJudge:     {KindJudge, KindModel, KindService},
	RoleGrader:    {KindGrader, KindJudge, KindModel, KindTool, KindService},
	RoleTool:      {KindTool, KindRuntime},
	RoleRuntime:   {KindRuntime, KindTool},
	RoleDataset:   {KindDataset},
	RoleService:   {KindService},
}

// Roles lists every valid Role.
func Roles() []Role {
	return []Role{RoleWriter, RoleCritic, RoleJudge, RoleGrader, RoleEmbedder, RoleGenerator,
		RoleCandidate, RoleIncumbent, RoleTool, RoleRuntime, RoleDataset, RoleService}
}

// Valid reports whether r is one of Roles().
func (r Role) Valid() bool {
	_, ok := roleKinds[r]
	return ok
}

// Item is one thing a design puts to work, as the design lists it. The studies
// package embeds a list of these in the design file.
type Item struct {
	Role       Role   `json:"role"`
	Name       string `json:"name"`
	RegistryID string `json:"registry_id"`
	Use        Use    `json:"use"`
}

// ValidateItems checks the shape of a design's item list, naming the field
// (path[i].use, …) within file. It does not consult the registry; Check does.
func ValidateItems(file, path string, items []Item) error {
	p := parser{file: file}
	for i, it := range items {
		at := fmt.Sprintf("%s[%d]", path, i)
		if !it.Role.Valid() {
			return p.errf(at+".role", fmt.Sprintf("%q is not a role", it.Role), "use one of %s", listRoles())
		}
		if strings.TrimSpace(it.Name) == "" {
			return p.errf(at+".name", "is empty", "name the model, tool or dataset as the design uses it")
		}
		if !it.Use.Valid() {
			return p.errf(at+".use", fmt.Sprintf("%q is not a use", it.Use), "use one of %s", strings.Join(useNames(), ", "))
		}
		if it.RegistryID == "" {
			return p.errf(at+".registry_id", "is empty",
				"after reading the terms at the source, add an entry with id %q to the studio's licence registry and put that id here", suggestID(it.Name))
		}
	}
	return nil
}

// Line is one checked item: the entry and verdict that let it through.
type Line struct {
	Item    Item
	EntryID string
	Verdict Decision
	Reading string
	Clause  string
	// Default is true when the entry has no verdict for this use and the use is
	// not one providers commonly ban: a use is allowed unless a clause
	// restricts it.
	Default bool
	// Registry is the file the entry came from (a path, or BundledFile), so
	// a reader of a layered check knows whose reading let the item through.
	Registry string
}

// String gives the line in the form the seed spec asks designs to carry, e.g.
// "writer: SmolLM2-135M-Instruct (smollm2-135m-instruct, inference: allowed)".
func (l Line) String() string {
	return fmt.Sprintf("%s: %s (%s, %s: %s)", l.Item.Role, l.Item.Name, l.EntryID, l.Item.Use, l.Verdict)
}

// Sourced is String followed by the registry file the entry came from, e.g.
// "… (rig-bank-x, evaluation: allowed) from /studio/registry.json". String
// stays the seed spec's form because reviews and reports quote it.
func (l Line) Sourced() string {
	if l.Registry == "" {
		return l.String()
	}
	return l.String() + " from " + l.Registry
}

// Block is one item that stops the design, with what to do about it.
type Block struct {
	Item   Item
	Reason string
	Fix    string
}

func (b Block) String() string {
	id := b.Item.RegistryID
	if id == "" {
		id = "no registry id"
	}
	return fmt.Sprintf("%s: %s (%s, %s): %s (%s)", b.Item.Role, b.Item.Name, id, b.Item.Use, b.Reason, b.Fix)
}

// Result is the outcome of Check: one line per item that passed and one block
// per item that did not.
type Result struct {
	Lines  []Line
	Blocks []Block
}

// Err returns a *BlockedError (errors.Is ErrBlocked) when anything blocks, nil
// otherwise.
func (r Result) Err() error {
	if len(r.Blocks) == 0 {
		return nil
	}
	return &BlockedError{Blocks: append([]Block(nil), r.Blocks...)}
}

// WriteTo prints the passing lines, each naming its registry file, then the
// blocks, one per line.
func (r Result) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, l := range r.Lines {
		k, err := fmt.Fprintln(w, l.Sourced())
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	for _, b := range r.Blocks {
		k, err := fmt.Fprintln(w, "BLOCKED "+b.String())
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Check rules on every item against one registry, not layered over the
// bundled one (Set.Check layers). It never stops at the first problem: every
// block is listed so one pass shows all the reading to do.
func Check(reg *Registry, items []Item) Result {
	return (&Set{Studio: reg}).Check(items)
}

func checkOne(set *Set, it Item) (Line, *Block) {
	block := func(reason, fix string, args ...any) (Line, *Block) {
		return Line{}, &Block{Item: it, Reason: reason, Fix: fmt.Sprintf(fix, args...)}
	}
	if !it.Role.Valid() {
		return block(fmt.Sprintf("role %q is not a role", it.Role), "use one of %s", listRoles())
	}
	if !it.Use.Valid() {
		return block(fmt.Sprintf("use %q is not a use", it.Use), "use one of %s", strings.Join(useNames(), ", "))
	}
	if it.RegistryID == "" {
		id := suggestID(it.Name)
		return block("the item names no registry entry",
			"after reading the terms at the source, add an entry with id %q to %s, and put that id in registry_id", id, set.addTo())
	}
	e, from, ok := set.Find(it.RegistryID)
	if !ok {
		return block(fmt.Sprintf("no entry %q in %s", it.RegistryID, set.Files()),
			"after reading the terms at the source, add an entry with id %q to %s", it.RegistryID, set.addTo())
	}
	// A bundled entry cannot be edited in place; the fix is a studio entry
	// of the same id, which wins over it.
	fixIn := from.File
	if from != set.Studio || from.File == BundledFile {
		fixIn = set.addTo() + `, copying the bundled entry "` + e.ID + `"`
	}
	if kinds := roleKinds[it.Role]; !containsKind(kinds, e.Kind) {
		return block(fmt.Sprintf("entry %q in %s is a %s, and a %s must be backed by a %s entry", e.ID, from.File, e.Kind, it.Role, joinKinds(kinds)),
			"point registry_id at the entry for the item itself, or correct the entry's kind in %s", fixIn)
	}
	v, has := e.Verdicts[it.Use]
	if !has || strings.TrimSpace(v.Reading) == "" {
		if it.Use.CommonlyBanned() {
			return block(fmt.Sprintf("%s is a use providers commonly ban, and entry %q in %s has no reading for it", it.Use, e.ID, from.File),
				"read the clause at %s and add verdicts.%s with its verdict and reading to entry %q in %s", e.SourcePage, it.Use, e.ID, fixIn)
		}
		if !has {
			return Line{Item: it, EntryID: e.ID, Verdict: Allowed, Default: true,
				Reading: "no clause restricting this use was recorded", Clause: e.Clause, Registry: from.File}, nil
		}
	}
	clause := v.Clause
	if clause == "" {
		clause = e.Clause
	}
	if v.Verdict == Banned {
		return block(fmt.Sprintf("%s is banned by %s (%s), as entry %q in %s reads it: %s", it.Use, e.Licence, clause, e.ID, from.File, v.Reading),
			"drop this use of the item or choose another item; a banned use cannot be registered")
	}
	if v.Verdict != Allowed && v.Verdict != Restricted {
		return block(fmt.Sprintf("entry %q in %s gives %s the verdict %q", e.ID, from.File, it.Use, v.Verdict),
			"set verdicts.%s.verdict to allowed, banned or restricted in %s", it.Use, fixIn)
	}
	return Line{Item: it, EntryID: e.ID, Verdict: v.Verdict, Reading: v.Reading, Clause: clause, Registry: from.File}, nil
}

// RunCheck checks items against the studio registry at registryPath layered
// over the bundled one (the bundled one alone when registryPath is empty),
// prints the result to w, and returns the blocking error if any.
func RunCheck(ctx context.Context, w io.Writer, registryPath string, items []Item) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	set, err := OpenSet(registryPath)
	if err != nil {
		return err
	}
	return WriteCheck(w, set.Check(items))
}

// WriteCheck prints a check's result to w and returns its blocking error.
func WriteCheck(w io.Writer, res Result) error {
	if _, err := res.WriteTo(w); err != nil {
		return fmt.Errorf("licence check: writing result: %w", err)
	}
	return res.Err()
}

func containsKind(ks []Kind, k Kind) bool {
	for _, v := range ks {
		if v == k {
			return true
		}
	}
	return false
}

func joinKinds(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, " or ")
}

func listRoles() string {
	s := []string{}
	for _, r := range Roles() {
		s = append(s, string(r))
	}
	return strings.Join(s, ", ")
}

// suggestID turns an item name into an id the registry would accept, so the
// fix in a message can be pasted.
func suggestID(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '.' || r == '_'
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" || !idPattern.MatchString(s) {
		return "new-item"
	}
	return s
}
