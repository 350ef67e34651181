package fidelity

import (
	"encoding/json"
	"io"
	"sort"

	"rig/internal/atomicfile"
)

// WriteStudy writes a study's fidelity records to path, one StudyRecord a
// line in job kind, profile, arm and task order, replacing the file whole
// (atomically: a reader sees the records before or after, never half).
func WriteStudy(path string, recs []StudyRecord) error {
	sorted := append([]StudyRecord(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		switch {
		case a.JobKind != b.JobKind:
			return a.JobKind < b.JobKind
		case a.Profile != b.Profile:
			return a.Profile < b.Profile
		case a.Arm != b.Arm:
			return a.Arm < b.Arm
		}
		return a.Task < b.Task
	})
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, r := range sorted {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	})
}
