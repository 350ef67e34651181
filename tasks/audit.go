package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"rig/internal/atomicfile"
	"sort"
	"strings"
	"time"
)

// AuditRecord freezes a bank's hash after every key passed its grader. It is
// written once per bank hash and never rewritten.
type AuditRecord struct {
	File        string        `json:"file"`
	JobKind     string        `json:"job_kind"`
	BankVersion string        `json:"bank_version"`
	BankHash    string        `json:"bank_hash"`
	Tasks       int           `json:"tasks"`
	Graders     []string      `json:"graders"`
	Results     []AuditResult `json:"results"`
	// NearDuplicates are the pairs of tasks alike at or above the lint's
	// threshold (NearMethod): not refused, since tasks from one template
	// share wording by design, but listed for the reviewer and the report.
	NearDuplicates []Pair    `json:"near_duplicates,omitempty"`
	NearMethod     string    `json:"near_method,omitempty"`
	AuditedAt      time.Time `json:"audited_at"`
}

// AuditResult is one key's grade during the audit.
type AuditResult struct {
	TaskID string  `json:"task_id"`
	Grader string  `json:"grader"`
	Score  float64 `json:"score"`
	Pass   bool    `json:"pass"`
}

func auditPath(dir, hash string) string {
	return filepath.Join(dir, "audit-"+hash+".json")
}

// Audit runs every key through its grader (and, for code tasks, checks that
// the unfixed repository fails), then writes an audit record under dir that
// freezes the bank hash and lists the near duplicates. If two tasks are
// exact duplicates it returns a *DuplicateTaskError, and if any key fails a
// *KeyFailedError; either way it writes nothing.
func Audit(ctx context.Context, b *Bank, reg *Registry, dir string) (AuditRecord, error) {
	if err := reg.Validate(b); err != nil {
		return AuditRecord{}, err
	}
	exact, near := Duplicates(b)
	if err := duplicateError(b, exact); err != nil {
		return AuditRecord{}, err
	}
	if ids := fewShotLeaks(b); len(ids) > 0 {
		return AuditRecord{}, fmt.Errorf("%s: header completion.few_shot_prefix holds the prompt of task(s) %s, so a completion-format arm is shown the answer (write examples that are not tasks of the bank, or remove those tasks); no audit record written: %w",
			b.File, strings.Join(ids, ", "), ErrLeak)
	}
	rec := AuditRecord{File: b.File, JobKind: b.Header.JobKind, BankVersion: b.Header.BankVersion, BankHash: b.Hash, Tasks: len(b.Tasks),
		NearDuplicates: near, NearMethod: NearMethod()}
	graders := map[string]bool{}
	var fails []KeyFailure
	errs := checkAll(ctx, reg, b.Tasks)
	if err := ctx.Err(); err != nil {
		return AuditRecord{}, err
	}
	for i, t := range b.Tasks {
		graders[t.Grader.String()] = true
		if err := errs[i]; err != nil {
			fails = append(fails, KeyFailure{TaskID: t.ID, Reason: fmt.Sprintf("line %d: %v", t.line, err)})
			rec.Results = append(rec.Results, AuditResult{TaskID: t.ID, Grader: t.Grader.String()})
			continue
		}
		rec.Results = append(rec.Results, AuditResult{TaskID: t.ID, Grader: t.Grader.String(), Score: 1, Pass: true})
	}
	if len(fails) > 0 {
		return AuditRecord{}, &KeyFailedError{File: b.File, Failures: fails}
	}
	for g := range graders {
		rec.Graders = append(rec.Graders, g)
	}
	sort.Strings(rec.Graders)
	rec.AuditedAt = time.Now().UTC()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return AuditRecord{}, fmt.Errorf("audit dir: %w", err)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return AuditRecord{}, err
	}
	if err := writeAtomic(auditPath(dir, b.Hash), append(data, '\n')); err != nil {
		return AuditRecord{}, fmt.Errorf("write audit record: %w", err)
	}
	return rec, nil
}

// CheckAudited returns the audit record for the bank's current hash. A bank
// with no record, or edited since its audit, gets an *AuditError wrapping
// ErrNotAudited or ErrBankChanged; the freeze refuses on either.
func CheckAudited(b *Bank, dir string) (AuditRecord, error) {
	return CheckAuditedWith(os.Open, b, dir)
}

// CheckAuditedWith is CheckAudited opening the audit folder and its records
// with open (see LoadBankWith).
func CheckAuditedWith(open func(string) (*os.File, error), b *Bank, dir string) (AuditRecord, error) {
	data, err := readWith(open, auditPath(dir, b.Hash))
	if err == nil {
		var rec AuditRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return rec, fmt.Errorf("%s: %w (re-run the audit)", auditPath(dir, b.Hash), err)
		}
		if rec.BankHash != b.Hash {
			return rec, &AuditError{File: b.File, Recorded: rec.BankHash, Current: b.Hash, Err: ErrBankChanged}
		}
		return rec, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return AuditRecord{}, fmt.Errorf("read audit record: %w", err)
	}
	// Name the hash that was audited, if this bank version was audited at all.
	var entries []os.DirEntry
	if d, err := open(dir); err == nil {
		entries, _ = d.ReadDir(-1)
		d.Close()
	}
	// In name order, as os.ReadDir gives them, so the record named is the same each time.
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "audit-") {
			continue
		}
		data, err := readWith(open, filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var rec AuditRecord
		if json.Unmarshal(data, &rec) == nil && rec.JobKind == b.Header.JobKind && rec.BankVersion == b.Header.BankVersion {
			return AuditRecord{}, &AuditError{File: b.File, Recorded: rec.BankHash, Current: b.Hash, Err: ErrBankChanged}
		}
	}
	return AuditRecord{}, &AuditError{File: b.File, Current: b.Hash, Err: ErrNotAudited}
}

// readWith is os.ReadFile opening the file with open.
func readWith(open func(string) (*os.File, error), path string) ([]byte, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeAtomic writes through internal/atomicfile: a crash leaves either the
// old file or the new one.
func writeAtomic(path string, data []byte) error {
	return atomicfile.WriteBytes(path, data, 0o600)
}

// RunAudit is the body of `rig tasks audit BANK`: parse, audit, print.
func RunAudit(ctx context.Context, w io.Writer, file, dir string, reg *Registry) (AuditRecord, error) {
	b, err := LoadBank(file)
	if err != nil {
		return AuditRecord{}, err
	}
	rec, err := Audit(ctx, b, reg, dir)
	if err != nil {
		return rec, err
	}
	if _, err := fmt.Fprintf(w, "%s: %d keys pass their graders (%s); bank hash %s frozen in %s\n",
		file, rec.Tasks, strings.Join(rec.Graders, ", "), rec.BankHash, auditPath(dir, rec.BankHash)); err != nil {
		return rec, err
	}
	if len(rec.NearDuplicates) > 0 {
		fmt.Fprintf(w, "near duplicates (%s), kept and listed in the record: %d\n", rec.NearMethod, len(rec.NearDuplicates))
		for _, p := range rec.NearDuplicates {
			fmt.Fprintf(w, "  %s ~ %s (%.2f)\n", p.A, p.B, p.Similarity)
		}
	}
	return rec, nil
}
