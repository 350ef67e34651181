package harnesslog

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// memberCap bounds one member of an .eval zip (or a .json log) read into
// memory: a log's header or one sample.
const memberCap = 256 << 20

// inspectHeader is the part of an eval log's header rig reads.
type inspectHeader struct {
	Eval *struct {
		Task  string `json:"task"`
		Model string `json:"model"`
	} `json:"eval"`
	Samples []json.RawMessage `json:"samples"`
}

// inspectSample is the part of an EvalSample rig reads.
type inspectSample struct {
	ID     json.RawMessage `json:"id"`
	Epoch  int             `json:"epoch"`
	Scores map[string]struct {
		Value json.RawMessage `json:"value"`
	} `json:"scores"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// readInspect reads an Inspect eval log: the .eval zip (header.json and
// one samples/ member per sample) or the .json form (one document).
func readInspect(path string) (Log, error) {
	if strings.HasSuffix(path, ".json") {
		data, err := readCapped(path)
		if err != nil {
			return Log{}, err
		}
		return ParseInspectJSON(data, path)
	}
	zr, err := zip.OpenReader(path)
	if err != nil {
		return Log{}, fmt.Errorf("%s: not an Inspect .eval log (a zip): %w (pass an .eval or a .json log)", path, err)
	}
	defer zr.Close()
	members := map[string][]byte{}
	for _, f := range zr.File {
		if f.Name != "header.json" && !(strings.HasPrefix(f.Name, "samples/") && strings.HasSuffix(f.Name, ".json")) {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return Log{}, fmt.Errorf("%s: %s: %w", path, f.Name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, memberCap+1))
		rc.Close()
		if err != nil {
			return Log{}, fmt.Errorf("%s: %s: %w", path, f.Name, err)
		}
		if len(data) > memberCap {
			return Log{}, fmt.Errorf("%s: %s is over %d MiB", path, f.Name, memberCap>>20)
		}
		members[f.Name] = data
	}
	return ParseInspectZip(members, path)
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, memberCap+1))
	if err != nil {
		return nil, err
	}
	if len(data) > memberCap {
		return nil, fmt.Errorf("%s is over %d MiB", path, memberCap>>20)
	}
	return data, nil
}

// ParseInspectZip reads the members of an .eval log (header.json and
// samples/…json, by name).
func ParseInspectZip(members map[string][]byte, file string) (Log, error) {
	head, ok := members["header.json"]
	if !ok {
		return Log{}, &FieldError{File: file, Field: "header.json", Msg: "missing: an .eval log holds its header there (was it still being written?)"}
	}
	var h inspectHeader
	if err := json.Unmarshal(head, &h); err != nil || h.Eval == nil {
		return Log{}, &FieldError{File: file + "!header.json", Field: "eval", Msg: fmt.Sprintf("no eval spec (%v)", err)}
	}
	names := make([]string, 0, len(members))
	for n := range members {
		if n != "header.json" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	l := Log{Format: Inspect, Source: file, Model: h.Eval.Model}
	for _, n := range names {
		s, ok, err := inspectSampleOf(members[n], file+"!"+n, h.Eval.Task)
		if err != nil {
			return Log{}, err
		}
		if ok {
			l.Samples = append(l.Samples, s)
		}
	}
	return l, nil
}

// ParseInspectJSON reads an eval log's .json form.
func ParseInspectJSON(data []byte, file string) (Log, error) {
	var h inspectHeader
	if err := json.Unmarshal(data, &h); err != nil {
		return Log{}, &FieldError{File: file, Field: "log", Msg: fmt.Sprintf("not JSON (%v); pass an Inspect eval log", err)}
	}
	if h.Eval == nil {
		return Log{}, &FieldError{File: file, Field: "eval", Msg: "missing: not an Inspect eval log"}
	}
	l := Log{Format: Inspect, Source: file, Model: h.Eval.Model}
	for i, raw := range h.Samples {
		s, ok, err := inspectSampleOf(raw, fmt.Sprintf("%s: samples[%d]", file, i), h.Eval.Task)
		if err != nil {
			return Log{}, err
		}
		if ok {
			l.Samples = append(l.Samples, s)
		}
	}
	return l, nil
}

// inspectSampleOf reads one sample; ok is false for a sample that has no
// score (an error), which pairs with nothing.
func inspectSampleOf(data []byte, where, task string) (Sample, bool, error) {
	var s inspectSample
	if err := json.Unmarshal(data, &s); err != nil {
		return Sample{}, false, &FieldError{File: where, Field: "sample", Msg: fmt.Sprintf("not an EvalSample (%v)", err)}
	}
	if len(s.ID) == 0 {
		return Sample{}, false, &FieldError{File: where, Field: "id", Msg: "missing (every Inspect sample has an id)"}
	}
	if s.Epoch < 1 {
		return Sample{}, false, &FieldError{File: where, Field: "epoch", Msg: fmt.Sprintf("%d: Inspect's epochs start at 1", s.Epoch)}
	}
	if s.Error != nil || len(s.Scores) == 0 {
		return Sample{}, false, nil
	}
	out := Sample{Task: task, ID: strings.Trim(string(s.ID), `"`), Repeat: s.Epoch, Metrics: map[string]float64{}}
	for name, sc := range s.Scores {
		if v, ok := inspectValue(sc.Value); ok {
			out.Metrics[name] = v
			continue
		}
		var parts map[string]json.RawMessage
		if json.Unmarshal(sc.Value, &parts) == nil {
			for k, raw := range parts {
				if v, ok := inspectValue(raw); ok {
					out.Metrics[name+"/"+k] = v
				}
			}
		}
	}
	return out, len(out.Metrics) > 0, nil
}

// inspectValue is a score value as a number: numbers, booleans, and
// Inspect's letter grades (C correct, I incorrect, P partial, N no answer)
// at the values its value_to_float gives them.
func inspectValue(raw json.RawMessage) (float64, bool) {
	if v, ok := scalar(raw); ok {
		return v, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	switch strings.ToUpper(s) {
	case "C":
		return 1, true
	case "I", "N":
		return 0, true
	case "P":
		return 0.5, true
	}
	return 0, false
}
