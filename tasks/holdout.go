package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"rig/internal/atomicfile"
	"rig/internal/jsonerr"
	"rig/internal/sizecap"
)

// UsedVersion records that a decided study used a bank version; from then
// on its hold-out split is fixed.
type UsedVersion struct {
	JobKind     string    `json:"job_kind"`
	BankVersion string    `json:"bank_version"`
	BankHash    string    `json:"bank_hash"`
	Study       string    `json:"study"`
	DecidedAt   time.Time `json:"decided_at"`
	// Holdout is the ids of the version's hold-out tasks when it was used,
	// sorted; nil when not recorded (the bank on disk no longer had the
	// hash the study used).
	Holdout []string `json:"holdout"`
}

// UsedVersions is the used-versions record file.
type UsedVersions struct {
	Used []UsedVersion `json:"used"`
}

// usedCap bounds the used-versions record: one short entry per bank version.
var usedCap = sizecap.Cap{What: "used-versions record", Limit: 4 << 20, Fix: "the file holds one short entry per bank version used: name the record rig wrote"}

// LoadUsed reads the record; a missing file is an empty record.
func LoadUsed(path string) (UsedVersions, error) { return LoadUsedWith(os.Open, path) }

// LoadUsedWith is LoadUsed opening the record with open (see LoadBankWith).
func LoadUsedWith(open func(string) (*os.File, error), path string) (UsedVersions, error) {
	var u UsedVersions
	f, err := open(path)
	if errors.Is(err, os.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return u, err
	}
	defer f.Close()
	if err := usedCap.Check(f, path); err != nil {
		return u, err
	}
	data, err := usedCap.Read(f, path)
	if err != nil {
		return u, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return u, fmt.Errorf("%s: %s (the file holds {\"used\":[...]})", path, jsonerr.Message(err))
	}
	return u, nil
}

// Find returns the first use of a job kind's bank version.
func (u UsedVersions) Find(jobKind, bankVersion string) (UsedVersion, bool) {
	for _, v := range u.Used {
		if v.JobKind == jobKind && v.BankVersion == bankVersion {
			return v, true
		}
	}
	return UsedVersion{}, false
}

// usedMu serialises this process's writers of used-version records.
var usedMu sync.Mutex

// MarkUsed appends a use to the record file, creating its folder; the
// decision step calls it. A use already recorded (same job kind, version,
// hash and study) is not appended again.
func MarkUsed(path string, v UsedVersion) error {
	usedMu.Lock()
	defer usedMu.Unlock()
	u, err := LoadUsed(path)
	if err != nil {
		return err
	}
	for _, w := range u.Used {
		if w.JobKind == v.JobKind && w.BankVersion == v.BankVersion && w.BankHash == v.BankHash && w.Study == v.Study {
			return nil
		}
	}
	if v.DecidedAt.IsZero() {
		v.DecidedAt = time.Now().UTC()
	}
	u.Used = append(u.Used, v)
	data, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Readable by all, unlike the audit records: the daemon that writes it
	// at decide is often root, and a later freeze reads it with its caller's
	// rights (it lies beside their bank, in their folder). It holds what the
	// bank and its study already show: versions, hashes, hold-out ids.
	return atomicfile.WriteBytes(path, append(data, '\n'), 0o644)
}

// HoldoutIDs lists the ids of the bank's hold-out tasks, sorted; never nil,
// so an empty split is recorded as [] and told apart from none recorded.
func (b *Bank) HoldoutIDs() []string {
	ids := []string{}
	for _, t := range b.Tasks {
		if t.Holdout {
			ids = append(ids, t.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// SplitChange is a used bank version whose hold-out split is not the one the
// decided study used.
type SplitChange struct {
	Used UsedVersion
	// Added and Removed are the ids flagged hold-out since, and unflagged
	// since. Both are empty when the use did not record its split
	// (Used.Holdout nil): the bank's content changed and the split cannot be
	// shown to be the same.
	Added, Removed []string
}

// SplitChanged returns the first recorded use of b's job kind and version
// whose hold-out split differs from b's: the version's content changed in
// place after a decision (b.Hash is not the hash the study used) and either
// its hold-out set differs or the use did not record one. A change that
// leaves the split as it was is not reported here (the bank's audit is what
// catches it).
func (u UsedVersions) SplitChanged(b *Bank) (SplitChange, bool) {
	now := b.HoldoutIDs()
	for _, v := range u.Used {
		if v.JobKind != b.Header.JobKind || v.BankVersion != b.Header.BankVersion || v.BankHash == b.Hash {
			continue
		}
		if v.Holdout == nil {
			return SplitChange{Used: v}, true
		}
		added, removed := diffIDs(v.Holdout, now)
		if len(added) > 0 || len(removed) > 0 {
			return SplitChange{Used: v, Added: added, Removed: removed}, true
		}
	}
	return SplitChange{}, false
}

// diffIDs returns the ids in now but not in was, and in was but not in now.
func diffIDs(was, now []string) (added, removed []string) {
	in := func(ids []string) map[string]bool {
		m := make(map[string]bool, len(ids))
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	w, n := in(was), in(now)
	for _, id := range now {
		if !w[id] {
			added = append(added, id)
		}
	}
	for _, id := range was {
		if !n[id] {
			removed = append(removed, id)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

// FlipHoldout sets the hold-out flag of the named tasks and rewrites the
// bank file in canonical form. It refuses with a *HoldoutLockedError when a
// decided study used this bank version, and writes nothing on any error.
// The flip changes the bank hash, so the bank must be audited again.
func FlipHoldout(bankFile, usedFile string, ids []string, holdout bool) (*Bank, error) {
	b, err := LoadBank(bankFile)
	if err != nil {
		return nil, err
	}
	used, err := LoadUsed(usedFile)
	if err != nil {
		return nil, err
	}
	if v, ok := used.Find(b.Header.JobKind, b.Header.BankVersion); ok {
		return nil, &HoldoutLockedError{File: bankFile, BankVersion: b.Header.BankVersion, Study: v.Study}
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for i := range b.Tasks {
		if want[b.Tasks[i].ID] {
			b.Tasks[i].Holdout = holdout
			delete(want, b.Tasks[i].ID)
		}
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for id := range want {
			missing = append(missing, id)
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("%s: no task with id %s (check the ids; nothing written)", bankFile, strings.Join(missing, ", "))
	}
	var buf bytes.Buffer
	if err := b.Encode(&buf); err != nil {
		return nil, err
	}
	if b.Hash, err = b.computeHash(); err != nil {
		return nil, err
	}
	if err := writeAtomic(bankFile, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("rewrite bank: %w", err)
	}
	return b, nil
}
