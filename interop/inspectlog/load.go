package inspectlog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"path/filepath"
	"sort"
	"strings"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/receipts"
	"rig/studies"
	"rig/tasks"
)

// Load reads the evidence of one execution of the study: its frozen
// snapshot (design and banks, each bank checked against its frozen hash),
// the receipts (the JSONL `rig receipts export` writes, as the daemon
// serves them) and each arm's generation record. An empty id names the
// execution whose receipts began last.
func Load(study layout.Study, id string, receiptsJSONL io.Reader) (Execution, error) {
	all, err := readReceipts(receiptsJSONL)
	if err != nil {
		return Execution{}, err
	}
	if id == "" {
		if id, err = latest(study.Name(), all); err != nil {
			return Execution{}, err
		}
	}
	var snap studies.Snapshot
	if err := atomicfile.ReadJSON(study.Snapshot(), &snap); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Execution{}, fmt.Errorf("study %s is not frozen: %s is missing (an execution needs a frozen study)", study.Name(), study.Snapshot())
		}
		return Execution{}, fmt.Errorf("%s: %w", study.Snapshot(), err)
	}
	if err := snap.Verify(); err != nil {
		return Execution{}, fmt.Errorf("%s: %w", study.Snapshot(), err)
	}
	design, err := snap.DesignValue()
	if err != nil {
		return Execution{}, err
	}
	x := Execution{Study: study.Name(), ID: id, DesignHash: snap.DesignHash, Design: design, Banks: map[string]Bank{}, Rows: map[string][]genrecord.Row{}}
	for _, r := range all {
		if r.ExecutionID == id {
			x.Receipts = append(x.Receipts, r)
		}
	}
	if len(x.Receipts) == 0 {
		return Execution{}, fmt.Errorf("study %s has no receipts of execution %q (rig study status %s lists its executions)", study.Name(), id, study.Name())
	}
	for _, fb := range snap.Banks {
		b, err := tasks.LoadBank(fb.Path)
		if err != nil {
			return Execution{}, fmt.Errorf("job kind %s: %w", fb.JobKind, err)
		}
		if b.Hash != fb.SHA256 {
			return Execution{}, fmt.Errorf("job kind %s: bank %s hashes to %s, the snapshot froze %s: the bank changed since the freeze, so its keys are not the ones the trials were graded on (restore the frozen version)", fb.JobKind, fb.Path, studies.Short(b.Hash), studies.Short(fb.SHA256))
		}
		bank := Bank{Name: strings.TrimSuffix(filepath.Base(fb.Path), filepath.Ext(fb.Path)), Path: fb.Path, Hash: b.Hash, Tasks: map[string]tasks.Task{}}
		for _, t := range b.Tasks {
			bank.Tasks[t.ID] = t
		}
		x.Banks[fb.JobKind] = bank
	}
	exec, err := study.Execution(id)
	if err != nil {
		return Execution{}, err
	}
	for _, r := range x.Receipts {
		if _, done := x.Rows[r.Arm]; done {
			continue
		}
		path := exec.Records().Generation(r.Arm)
		_, rows, err := genrecord.ReadAll(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			x.Rows[r.Arm] = nil // an arm none of whose calls were kept
		case err != nil:
			return Execution{}, err
		default:
			x.Rows[r.Arm] = rows
		}
	}
	return x, nil
}

// readReceipts reads receipts JSONL, naming the line of one that does not
// parse.
func readReceipts(r io.Reader) ([]receipts.Receipt, error) {
	var out []receipts.Receipt
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var rec receipts.Receipt
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("receipts export line %d: %w", line, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// latest is the execution whose first receipt began last.
func latest(study string, rs []receipts.Receipt) (string, error) {
	first := map[string]receipts.Receipt{}
	for _, r := range rs {
		if f, ok := first[r.ExecutionID]; !ok || r.StartedAt.Before(f.StartedAt) {
			first[r.ExecutionID] = r
		}
	}
	if len(first) == 0 {
		return "", fmt.Errorf("study %s has no receipts: run it first (rig study run %s)", study, study)
	}
	ids := make([]string, 0, len(first))
	for id := range first {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := first[ids[i]].StartedAt, first[ids[j]].StartedAt
		if !a.Equal(b) {
			return a.After(b)
		}
		return ids[i] > ids[j]
	})
	return ids[0], nil
}
