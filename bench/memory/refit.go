package memory

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	gp "github.com/gpustack/gguf-parser-go"

	"rig/internal/gguf"
	"rig/preflight"
)

// Refit predicts again, and with opts.Fit fits again, from peaks measured
// before: the rows of tables that `rig bench preflight --table` wrote. A
// change to the memory model is then judged on the same measurements
// without running the runtimes again. The peaks are read at the table's
// MiB precision (±0.5 MiB, under 0.3% of any bundled model's peak). Rows
// name their model as the run did; opts.Models must hold those names.
func Refit(ctx context.Context, w io.Writer, opts Options, tables []string) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	cal := opts.Calibration
	if cal == nil {
		if cal, err = preflight.DefaultCalibration(); err != nil {
			return err
		}
	}
	var rows []Row
	seen := map[string]int{}
	for _, path := range tables {
		measured, err := readTable(path)
		if err != nil {
			return err
		}
		for _, r := range measured {
			if err := ctx.Err(); err != nil {
				return err
			}
			idx := -1
			for i, m := range opts.Models {
				if m.Name == r.Model {
					idx = i
				}
			}
			if idx < 0 {
				return fmt.Errorf("bench: %s: model %q is not among the models measured (%d given); run with the same --other-quants as the table's run", path, r.Model, len(opts.Models))
			}
			f, err := gguf.Open(opts.Models[idx].Path)
			if err != nil {
				return err
			}
			h, err := preflight.ReadHParams(f)
			if err != nil {
				return err
			}
			p := profile(opts, r.Context, r.KV)
			est, err := preflight.Predict(f, p, r.Runtime, cal)
			if err != nil {
				return err
			}
			r.Rig, r.parts, r.vocab = est.Peak, est.Peak-est.Overhead, h.Vocab
			if ref, err := gp.ParseGGUFFile(opts.Models[idx].Path); err == nil {
				r.Parser = parserEstimate(ref, p)
			}
			key := fmt.Sprint(r.Runtime, r.Model, r.Context, r.KV, r.PromptSentences)
			seen[key]++
			r.Repeat = seen[key]
			rows = append(rows, r)
		}
	}
	// A configuration read once has no repeat to compare with.
	for i := range rows {
		if seen[fmt.Sprint(rows[i].Runtime, rows[i].Model, rows[i].Context, rows[i].KV, rows[i].PromptSentences)] == 1 {
			rows[i].Repeat = 0
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("bench: %s: no measured rows", strings.Join(tables, ", "))
	}
	return finish(w, opts, cal, rows)
}

// readTable reads the measured rows of a bench table: model, runtime,
// context, KV type and measured MiB; failed rows are left out.
func readTable(path string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var rows []Row
	for n, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 12 || strings.TrimSpace(cells[0]) == "model" || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[4], "failed") {
			continue
		}
		ctx, err1 := strconv.Atoi(cells[2])
		mib, err2 := strconv.ParseFloat(cells[4], 64)
		if err1 != nil || err2 != nil || mib <= 0 {
			return nil, fmt.Errorf("bench: %s:%d: context %q and measured MiB %q: want an integer and a positive number", path, n+1, cells[2], cells[4])
		}
		r := Row{Model: cells[0], Runtime: cells[1], Context: ctx, KV: cells[3], Measured: preflight.Size(mib * float64(preflight.MiB)), PromptSentences: benchSentences(ctx)}
		if len(cells) > 12 {
			// The prompt's length, where the table records it; older
			// tables ran benchPrompt.
			if r.PromptSentences, err = strconv.Atoi(cells[12]); err != nil {
				return nil, fmt.Errorf("bench: %s:%d: prompt sentences %q: want an integer", path, n+1, cells[12])
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}
