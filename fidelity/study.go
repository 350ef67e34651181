package fidelity

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// StudyFile is the name of a study's fidelity records, beside its
// generations.jsonl: one StudyRecord per line.
const StudyFile = "fidelity.jsonl"

// Scored-by values: who computed an arm's tokens.
const (
	// ScoredByStack: the arm's own GGUF through the pinned llama.cpp scorer,
	// which is the arm's runtime build (a llama-server arm).
	ScoredByStack = "stack"
	// ScoredByModel: the arm's runtime cannot score given tokens (Ollama keeps
	// no token ids), so its GGUF was scored through the pinned llama.cpp
	// scorer; the figure is the model's, not the runtime's.
	ScoredByModel = "model"
)

// StudyRecord is one arm's scored tokens on one task of a job kind: the
// reference arm's kept output for that task (row RowID), prefill-scored
// through the reference and through the arm.
type StudyRecord struct {
	JobKind   string `json:"job_kind"`
	Reference string `json:"reference"`
	Arm       string `json:"arm"`
	Task      string `json:"task"`
	// RowID is the reference's kept generation row whose text was scored.
	RowID string `json:"row_id"`
	// ScoredBy is ScoredByStack or ScoredByModel.
	ScoredBy string `json:"scored_by"`
	// Profile is the card sub-study profile the arm ran at ("" outside one).
	Profile string  `json:"profile,omitempty"`
	Tokens  []Token `json:"tokens"`
}

// ReadStudy reads a study's fidelity records. A missing file is no records
// and no error: the study names no reference arm.
func ReadStudy(path string) ([]StudyRecord, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return DecodeStudy(f, path)
}

// DecodeStudy reads fidelity records from r; name is said in errors.
func DecodeStudy(r io.Reader, name string) ([]StudyRecord, error) {
	var out []StudyRecord
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec StudyRecord
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, line, err)
		}
		if rec.Arm == "" || rec.Task == "" || rec.JobKind == "" {
			return nil, fmt.Errorf("%s line %d: a record needs job_kind, arm and task", name, line)
		}
		if rec.ScoredBy != ScoredByStack && rec.ScoredBy != ScoredByModel {
			return nil, fmt.Errorf("%s line %d: scored_by is %q; want %q or %q", name, line, rec.ScoredBy, ScoredByStack, ScoredByModel)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// StudyUnits gathers one arm's records in a job kind (and profile) into
// units, one per task, in task order so that two arms pair unit by unit.
func StudyUnits(recs []StudyRecord, jobKind, profile, arm string) Units {
	var mine []StudyRecord
	for _, r := range recs {
		if r.JobKind == jobKind && r.Profile == profile && r.Arm == arm {
			mine = append(mine, r)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].Task < mine[j].Task })
	u := Units{Arm: arm}
	for _, r := range mine {
		u.Names = append(u.Names, r.Task)
		u.Tokens = append(u.Tokens, r.Tokens)
	}
	return u
}
