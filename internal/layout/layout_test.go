package layout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		check func(string) error
		name  string
		ok    bool
	}{
		{CheckStudyName, "demo", true},
		{CheckStudyName, "demo-2026.12_a", true},
		{CheckStudyName, strings.Repeat("a", 64), true},
		{CheckStudyName, strings.Repeat("a", 65), false},
		{CheckStudyName, "", false},
		{CheckStudyName, ".", false},
		{CheckStudyName, "..", false},
		{CheckStudyName, "../../x", false},
		{CheckStudyName, "..%2F..%2Fx", false},
		{CheckStudyName, "a/b", false},
		{CheckStudyName, `a\b`, false},
		{CheckStudyName, "/etc", false},
		{CheckStudyName, "-rf", false},
		{CheckStudyName, "Demo", false},
		{CheckStudyName, "demo\n", false},
		{CheckStudyName, "de\x00mo", false},
		{CheckExecutionID, "exec-1", true},
		{CheckExecutionID, "exec-120", true},
		{CheckExecutionID, "exec-0", false},
		{CheckExecutionID, "exec-01", false},
		{CheckExecutionID, "../exec-1", false},
		{CheckExecutionID, "exec-1/..", false},
		{CheckExecutionID, "", false},
		{CheckProposalID, "demo-0123456789ab", true},
		{CheckProposalID, "demo-0123456789AB", false},
		{CheckProposalID, "../baseline", false},
		{CheckProposalID, "demo-0123456789ab/../../x", false},
	} {
		err := tc.check(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.name, err, tc.ok)
		}
		var ne *NameError
		if err != nil && (!errors.Is(err, ErrInvalidName) || !errors.As(err, &ne) || !strings.Contains(err.Error(), ne.Rule)) {
			t.Errorf("%q: %v is not an ErrInvalidName naming its rule", tc.name, err)
		}
	}
}

// FuzzStudyName: a name the rule accepts is one path element directly
// under the studies folder, whatever the input.
func FuzzStudyName(f *testing.F) {
	for _, s := range []string{"demo", "..", "../../x", "a/b", "a..", ".a", "a\x00"} {
		f.Add(s)
	}
	root := filepath.Join("/srv", "rig")
	f.Fuzz(func(t *testing.T, name string) {
		if CheckStudyName(name) != nil {
			return
		}
		p := filepath.Join(Home(root).Studies(), name)
		if filepath.Dir(p) != Home(root).Studies() || filepath.Base(p) != name || strings.ContainsAny(name, "/\\\x00") {
			t.Fatalf("accepted %q joins to %s, outside one element under %s", name, p, Home(root).Studies())
		}
	})
}

func TestStudyRefusesALinkedFolder(t *testing.T) {
	home := Home(t.TempDir())
	if err := os.MkdirAll(home.Studies(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(home.Studies(), "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := home.Study("linked"); !errors.Is(err, ErrLink) {
		t.Errorf("a symlinked study folder: %v, want ErrLink", err)
	}
	s, err := home.Study("fresh") // not there yet: registering creates it
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir() != filepath.Join(string(home), "studies", "fresh") || s.Store() != filepath.Join(s.Dir(), "store.bolt") {
		t.Errorf("paths %s, %s", s.Dir(), s.Store())
	}
	if _, err := s.Execution("exec-1/../../../x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("an execution id that is a path: %v", err)
	}
	if _, err := s.Report(".."); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a report of execution ..: %v", err)
	}
	if _, err := home.Proposal("../baseline"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a proposal id that is a path: %v", err)
	}
}

func TestSpool(t *testing.T) {
	sp := Spool("/spool")
	x, err := sp.Execution("s1", "exec-2")
	if err != nil || x.Dir() != "/spool/s1/exec-2" || x.Snapshot() != "/spool/s1/exec-2/snapshot.json" {
		t.Fatalf("%+v %v", x, err)
	}
	for _, tc := range []struct {
		study, exec string
	}{{"../x", "exec-1"}, {"s1", "../../etc"}, {"s1", ""}} {
		if _, err := sp.Execution(tc.study, tc.exec); !errors.Is(err, ErrInvalidName) {
			t.Errorf("spool execution %q %q: %v", tc.study, tc.exec, err)
		}
	}
	for name, ok := range map[string]bool{
		"a%7Cqa%7Ct1%7C0#1.w1":          true,
		"a%7Cqa%7Ct1%7C0#1.gpu07.card0": true,
		"..":                            false,
		".":                             false,
		"../../../../root":              false,
		`a\b`:                           false,
		"a/b":                           false,
		"":                              false,
		"a b":                           false,
		"ā":                             false,
		strings.Repeat("a", 256):        false,
	} {
		p, err := x.Entry(name)
		if (err == nil) != ok {
			t.Errorf("entry %q: %v, want ok=%v", name, err, ok)
		}
		if err == nil && filepath.Dir(p) != x.Trials() {
			t.Errorf("entry %q joins to %s, outside %s", name, p, x.Trials())
		}
	}
}

// A home's identity is made once and read back the same, by any reader of
// the home (another process, a copy moved elsewhere); a damaged file is
// refused naming it, never silently replaced.
func TestHomeIdentityIsMadeOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	h := Home(dir)
	first, err := h.Identity()
	if err != nil || len(first) != 32 {
		t.Fatalf("first identity %q, %v", first, err)
	}
	again, err := Home(dir).Identity()
	if err != nil || again != first {
		t.Fatalf("read again: %q, %v; want %q", again, err, first)
	}
	other, err := Home(t.TempDir()).Identity()
	if err != nil || other == first {
		t.Errorf("another home's identity %q (%v) is this one's %q", other, err, first)
	}
	moved := t.TempDir()
	if err := os.Rename(h.IdentityFile(), Home(moved).IdentityFile()); err != nil {
		t.Fatal(err)
	}
	if got, err := Home(moved).Identity(); err != nil || got != first {
		t.Errorf("a moved home's identity %q, %v; want %q", got, err, first)
	}
	if err := os.WriteFile(Home(moved).IdentityFile(), []byte("../x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Home(moved).Identity(); err == nil || !strings.Contains(err.Error(), Home(moved).IdentityFile()) {
		t.Errorf("a damaged identity: %v; want refused naming the file", err)
	}
}
