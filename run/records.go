package run

import (
	"os"
	"path/filepath"

	"rig/genrecord"
	"rig/internal/layout"
)

// RecordTexts reads the kept output texts of an execution by row id: of
// the named arms' records, or of every record when no arm is named.
func RecordTexts(dir string, arms ...string) (map[string]string, error) {
	files, err := filepath.Glob(layout.Records(dir).Generations())
	if err != nil {
		return nil, err
	}
	if len(arms) > 0 {
		files = files[:0]
		for _, a := range arms {
			files = append(files, layout.Records(dir).Generation(a))
		}
	}
	out := map[string]string{}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		_, rows, err := genrecord.ReadAll(f)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.RowID] = r.Text
		}
	}
	return out, nil
}
