package inspectlog

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"rig/internal/atomicfile"
)

// The members of an .eval log, as Inspect's recorder names them.
const (
	headerMember     = "header.json"
	summariesMember  = "summaries.json"
	reductionsMember = "reductions.json"
	samplesDir       = "samples/"
)

// Write writes each log into dir as an .eval file and returns their paths.
// Each file is written whole beside its name and renamed into place
// (internal/atomicfile), and its bytes depend only on the log: members in a
// fixed order, each stamped with the log's creation time, JSON with sorted
// keys.
func Write(dir string, logs []Log) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, l := range logs {
		data, err := Encode(l)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, FileName(l))
		if err := atomicfile.WriteBytes(path, data, 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)

// FileName is the log's file name: its creation time first, as Inspect
// names its own logs so its viewer lists them in order, then the job kind
// and the arm.
func FileName(l Log) string {
	ts := l.Eval.Created
	if t, err := time.Parse("2006-01-02T15:04:05.000000+00:00", ts); err == nil {
		ts = t.Format("2006-01-02T15-04-05+00-00")
	}
	rig, _ := l.Eval.Metadata["rig"].(map[string]any)
	arm, _ := rig["arm"].(string)
	name := ts + "_" + l.Eval.Task + "_" + arm + "_" + l.Eval.EvalID
	return unsafeName.ReplaceAllString(name, "-") + ".eval"
}

// Encode is the log's .eval zip: header.json (the log without its samples),
// one samples/ID_epoch_N.json per sample, summaries.json and
// reductions.json.
func Encode(l Log) ([]byte, error) {
	stamp, err := time.Parse("2006-01-02T15:04:05.000000+00:00", l.Eval.Created)
	if err != nil {
		stamp = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	put := func(name string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: stamp})
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	summaries := make([]Summary, 0, len(l.Samples))
	for _, s := range l.Samples {
		if err := put(fmt.Sprintf("%s%s_epoch_%d.json", samplesDir, s.ID, s.Epoch), s); err != nil {
			return nil, err
		}
		summaries = append(summaries, s.summary())
	}
	if err := put(summariesMember, summaries); err != nil {
		return nil, err
	}
	reductions := l.Reductions
	if reductions == nil {
		reductions = []Reduction{}
	}
	if err := put(reductionsMember, reductions); err != nil {
		return nil, err
	}
	if err := put(headerMember, l); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
