package tasks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSplitChangedAfterUse(t *testing.T) {
	file := writeBank(t, testHeader, testTask("a"), testTask("b"))
	b, err := LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	used := filepath.Join(t.TempDir(), "audits", "used.json") // MarkUsed makes the folder
	if err := MarkUsed(used, UsedVersion{JobKind: "qa", BankVersion: "1", BankHash: b.Hash, Study: "s1", Holdout: b.HoldoutIDs()}); err != nil {
		t.Fatal(err)
	}
	// The same use again is not appended twice.
	if err := MarkUsed(used, UsedVersion{JobKind: "qa", BankVersion: "1", BankHash: b.Hash, Study: "s1", Holdout: b.HoldoutIDs()}); err != nil {
		t.Fatal(err)
	}
	u, err := LoadUsed(used)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Used) != 1 || u.Used[0].Holdout == nil || len(u.Used[0].Holdout) != 0 {
		t.Fatalf("used = %+v, want one use with an empty (not missing) split", u.Used)
	}
	if _, changed := u.SplitChanged(b); changed {
		t.Error("the bank as used is reported changed")
	}
	// A hand edit flips b to hold-out in place.
	flipped := writeBank(t, testHeader, testTask("a"), strings.Replace(testTask("b"), `"holdout":false`, `"holdout":true`, 1))
	fb, err := LoadBank(flipped)
	if err != nil {
		t.Fatal(err)
	}
	ch, changed := u.SplitChanged(fb)
	if !changed || ch.Used.Study != "s1" || !slices.Equal(ch.Added, []string{"b"}) || len(ch.Removed) != 0 {
		t.Errorf("flip in place: %+v, %v; want b added, naming s1", ch, changed)
	}
	// Another edit that keeps the split is the audit's business, not this check's.
	edited := writeBank(t, testHeader, testTask("a"), strings.Replace(testTask("b"), "easy", "hard", 1))
	eb, err := LoadBank(edited)
	if err != nil {
		t.Fatal(err)
	}
	if _, changed := u.SplitChanged(eb); changed {
		t.Error("an edit keeping the split reported as a flip")
	}
	// A use that recorded no split cannot show the split unchanged.
	legacy := UsedVersions{Used: []UsedVersion{{JobKind: "qa", BankVersion: "1", BankHash: b.Hash, Study: "old"}}}
	if ch, changed := legacy.SplitChanged(eb); !changed || ch.Used.Study != "old" {
		t.Errorf("unrecorded split: %+v, %v; want changed", ch, changed)
	}
	// Another bank version is free.
	v2 := writeBank(t, `{"schema_version":1,"job_kind":"qa","bank_version":"2"}`, testTask("a"), strings.Replace(testTask("b"), `"holdout":false`, `"holdout":true`, 1))
	b2, err := LoadBank(v2)
	if err != nil {
		t.Fatal(err)
	}
	if _, changed := u.SplitChanged(b2); changed {
		t.Error("version 2 reported as version 1's flip")
	}
}

func TestUsedRecordKeepsEmptySplit(t *testing.T) {
	raw, _ := json.Marshal(UsedVersion{Holdout: (&Bank{}).HoldoutIDs()})
	if !strings.Contains(string(raw), `"holdout":[]`) {
		t.Errorf("empty split encodes as %s, want []", raw)
	}
	path := filepath.Join(t.TempDir(), "used.json")
	if err := os.WriteFile(path, []byte(`{"used":[{"job_kind":"qa","bank_version":"1","bank_hash":"h","study":"s","decided_at":"2026-01-01T00:00:00Z"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := LoadUsed(path)
	if err != nil || len(u.Used) != 1 || u.Used[0].Holdout != nil {
		t.Errorf("a record without holdout = %+v, %v; want it read with no split", u, err)
	}
}
