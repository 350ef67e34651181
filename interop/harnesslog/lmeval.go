package harnesslog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// lm-eval writes one samples_TASK_DATE.jsonl per task under the run's
// output folder (in a subfolder named after the model); DATE is its run's
// date id.
var lmevalName = regexp.MustCompile(`^samples_(.+)_(\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$`)

// readLMEval reads one samples file, or every samples file of one run
// under a folder.
func readLMEval(path string) (Log, error) {
	files, err := lmevalFiles(path)
	if err != nil {
		return Log{}, err
	}
	l := Log{Format: LMEval, Source: path, Model: filepath.Base(filepath.Dir(files[0]))}
	for _, f := range files {
		task := lmevalName.FindStringSubmatch(filepath.Base(f))[1]
		fh, err := os.Open(f)
		if err != nil {
			return Log{}, err
		}
		ss, err := ParseLMEval(fh, f, task)
		fh.Close()
		if err != nil {
			return Log{}, err
		}
		l.Samples = append(l.Samples, ss...)
	}
	return l, nil
}

// lmevalFiles are the samples files at path: the file itself, or those
// under a folder, one per task. Two runs of one task under a folder are
// refused: which of them to compare is the caller's choice.
func lmevalFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		if !lmevalName.MatchString(filepath.Base(path)) {
			return nil, fmt.Errorf("%s: not an lm-eval samples file (lm_eval --log_samples writes samples_TASK_DATE.jsonl; the task's name is read from it)", path)
		}
		return []string{path}, nil
	}
	byTask := map[string][]string{}
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if m := lmevalName.FindStringSubmatch(d.Name()); m != nil && !d.IsDir() {
			byTask[m[1]] = append(byTask[m[1]], p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(byTask) == 0 {
		return nil, fmt.Errorf("%s: no samples_TASK_DATE.jsonl under it (run lm_eval with --log_samples and --output_path)", path)
	}
	var files []string
	for task, fs := range byTask {
		if len(fs) > 1 {
			sort.Strings(fs)
			return nil, fmt.Errorf("%s holds %d runs of task %s (%s): name the file of the one to compare", path, len(fs), task, strings.Join(fs, ", "))
		}
		files = append(files, fs[0])
	}
	sort.Strings(files)
	return files, nil
}

// lmevalLine is the part of a --log_samples line rig reads; the metric
// values sit beside these fields, under the names "metrics" lists.
type lmevalLine struct {
	DocID   *json.RawMessage `json:"doc_id"`
	Filter  string           `json:"filter"`
	Metrics *[]string        `json:"metrics"`
	DocHash string           `json:"doc_hash"`
}

// ParseLMEval reads one lm-eval --log_samples file of task. A metric whose
// value is not a number or a boolean (a corpus metric's per-item tuple) is
// left out; a line with no such metric is refused.
func ParseLMEval(r io.Reader, file, task string) ([]Sample, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []Sample
	seen := map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		bad := func(field, msg string) error { return &FieldError{File: file, Line: line, Field: field, Msg: msg} }
		var head lmevalLine
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, bad("line", fmt.Sprintf("not a JSON object (%v); each line of lm-eval's --log_samples output is one", err))
		}
		var all map[string]json.RawMessage
		if err := json.Unmarshal(raw, &all); err != nil {
			return nil, bad("line", err.Error())
		}
		if head.DocID == nil {
			return nil, bad("doc_id", "missing (lm-eval writes each item's index in its task)")
		}
		id := strings.Trim(string(*head.DocID), `"`)
		if head.Metrics == nil {
			return nil, bad("metrics", "missing (lm-eval lists the item's metric names)")
		}
		s := Sample{Task: task, ID: id, Repeat: 1, Metrics: map[string]float64{}, Hash: head.DocHash}
		for _, m := range *head.Metrics {
			v, ok := scalar(all[m])
			if !ok {
				continue
			}
			name := m
			if head.Filter != "" && head.Filter != "none" {
				name = m + "," + head.Filter
			}
			s.Metrics[name] = v
		}
		if len(s.Metrics) == 0 {
			return nil, bad("metrics", fmt.Sprintf("none of %v has a number or boolean value on this line", *head.Metrics))
		}
		// One line per item and filter: the filters' lines of one item
		// are one sample.
		if i, ok := seen[id]; ok {
			for k, v := range s.Metrics {
				if _, dup := out[i].Metrics[k]; dup {
					return nil, bad("doc_id", fmt.Sprintf("%s appears twice with metric %s (one line per item and filter)", id, k))
				}
				out[i].Metrics[k] = v
			}
			continue
		}
		seen[id] = len(out)
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", file, line+1, err)
	}
	return out, nil
}

// scalar is a metric value as a number: JSON numbers, and booleans as 1/0.
func scalar(raw json.RawMessage) (float64, bool) {
	s := strings.TrimSpace(string(raw))
	switch s {
	case "true":
		return 1, true
	case "false":
		return 0, true
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != v {
		return 0, false
	}
	return v, true
}
