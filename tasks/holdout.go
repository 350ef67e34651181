package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// UsedVersion records that a decided study used a bank version; from then
// on its hold-out split is fixed.
type UsedVersion struct {
	JobKind     string    `json:"job_kind"`
	BankVersion string    `json:"bank_version"`
	BankHash    string    `json:"bank_hash"`
	Study       string    `json:"study"`
	DecidedAt   time.Time `json:"decided_at"`
}

// UsedVersions is the used-versions record file.
type UsedVersions struct {
	Used []UsedVersion `json:"used"`
}

// LoadUsed reads the record; a missing file is an empty record.
func LoadUsed(path string) (UsedVersions, error) {
	var u UsedVersions
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return u, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return u, fmt.Errorf("%s: %w (the file holds {\"used\":[...]})", path, err)
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

// MarkUsed appends a use to the record file; the decision step calls it.
func MarkUsed(path string, v UsedVersion) error {
	u, err := LoadUsed(path)
	if err != nil {
		return err
	}
	if v.DecidedAt.IsZero() {
		v.DecidedAt = time.Now().UTC()
	}
	u.Used = append(u.Used, v)
	data, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(data, '\n'))
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
