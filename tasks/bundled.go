package tasks

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
)

//go:embed banks/*.jsonl
var bundledFS embed.FS

// Bundled parses the banks shipped with rig (extract-json and fix-test),
// for the demo and tests. File names are "banks/NAME.jsonl".
func Bundled() ([]*Bank, error) {
	names, err := fs.Glob(bundledFS, "banks/*.jsonl")
	if err != nil {
		return nil, err
	}
	var out []*Bank
	for _, n := range names {
		data, err := bundledFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		b, err := ParseBank(bytes.NewReader(data), n)
		if err != nil {
			return nil, fmt.Errorf("bundled bank %s: %w", path.Base(n), err)
		}
		out = append(out, b)
	}
	return out, nil
}
