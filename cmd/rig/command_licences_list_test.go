package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/licences"
)

func TestLicencesList(t *testing.T) {
	reg, err := licences.Bundled()
	if err != nil {
		t.Fatal(err)
	}
	out, err := runRig(t, "licences", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(reg.Entries)+1 {
		t.Errorf("%d lines, want a header and %d entries:\n%s", len(lines), len(reg.Entries), out)
	}
	for _, e := range reg.Entries {
		if !strings.Contains(out, e.ID) {
			t.Errorf("output lacks entry %q", e.ID)
		}
	}
}

func TestLicencesListRegistryFlag(t *testing.T) {
	dir := t.TempDir()
	reg, err := licences.Bundled()
	if err != nil {
		t.Fatal(err)
	}
	reg.Entries = reg.Entries[:1]
	one, err := reg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "one.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, one, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"schema_version":1,"entries":[{"id":""}]}`), 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := runRig(t, "licences", "list", "--registry", good)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(out), "\n"); n != 1 {
		t.Errorf("want header and one entry, got %d lines:\n%s", n+1, out)
	}

	_, err = runRig(t, "licences", "list", "--registry", bad)
	if err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("invalid registry: err = %v, want it to name bad.json", err)
	}
}
