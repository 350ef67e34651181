package genrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Rescorer re-scores kept rows on a live stack. Drivers implement it:
// llama-server by forcing the row's tokens with ForcedGrammar and n_probs,
// Ollama by seeded raw-mode regeneration. Stack reports the pins of the
// stack it will score on, hashed from the files it actually loads.
type Rescorer interface {
	Stack(ctx context.Context) (Pins, error)
	Rescore(ctx context.Context, row Row) ([]Step, error)
}

// ReplayOptions selects rows and sets the tolerance. Sample and Rows are
// exclusive; with neither every row is replayed.
type ReplayOptions struct {
	Sample    int      // replay a uniform random sample of this many rows
	Rows      []string // replay exactly these row ids
	Seed      uint64   // sample seed, recorded in the summary
	Tolerance Tolerance
	// WantSum, when set, is the sha256 from the receipt; a record that does
	// not match is refused before any replay.
	WantSum string
}

// Status is the outcome of a row or of a whole replay.
type Status string

// Outcomes. StackDiffers is neither a pass nor a fail of the text: the
// stack that would re-score it is not the one that made it.
const (
	StatusReproduced   Status = "reproduced"
	StatusMismatch     Status = "mismatch"
	StatusError        Status = "error"
	StatusStackDiffers Status = "stack differs"
)

// RowResult is the replay of one row.
type RowResult struct {
	RowID      string     `json:"row_id"`
	Line       int        `json:"line"`
	Arm        string     `json:"arm"`
	Role       Role       `json:"role"`
	Status     Status     `json:"status"`
	Comparison Comparison `json:"comparison"`
	Error      string     `json:"error,omitempty"`
	ReplayMS   float64    `json:"replay_ms"`
	WallMS     float64    `json:"original_wall_ms,omitempty"`
	// Method is how the row was re-scored where a runtime has more than
	// one way (an openai-server's prompt log-probabilities, or
	// regeneration), with why when it could not take the first.
	Method string `json:"method,omitempty"`
}

// Summary is a whole replay, fit for a report or a recipe card.
type Summary struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// ReceiptCheck says which receipt the sha256 was checked against, when
	// replay was given the study's store.
	ReceiptCheck string    `json:"receipt_check,omitempty"`
	Status       Status    `json:"status"`
	StackDiffs   []PinDiff `json:"stack_diffs,omitempty"`
	Pins         Pins      `json:"pins"`
	RecordRows   int       `json:"record_rows"`
	Selection    string    `json:"selection"`
	Seed         uint64    `json:"seed,omitempty"`
	Tolerance    Tolerance `json:"tolerance"`
	// ToleranceSource says where the tolerance came from (a calibration
	// file); empty when it was given by hand or left at exact.
	ToleranceSource string `json:"tolerance_source,omitempty"`
	// Mode is how the rows were re-scored: "exact" (decode steps through
	// the runtime) or "prefill" (one batched pass through its library).
	Mode string `json:"mode,omitempty"`
	// Stack is the fingerprint of what re-scored the rows, beyond the pins
	// (the prefill scorer's digest and the library build it ran on).
	Stack string `json:"stack,omitempty"`
	// Fallback counts, in prefill mode, the rows the batched pass disputed
	// and that were re-checked by decode steps; FallbackHeld those of them
	// the decode steps reproduced.
	Fallback     int         `json:"fallback_rows,omitempty"`
	FallbackHeld int         `json:"fallback_reproduced,omitempty"`
	Replayed     int         `json:"replayed"`
	Reproduced   int         `json:"reproduced"`
	Mismatched   int         `json:"mismatched"`
	Errors       int         `json:"errors"`
	Unchecked    int         `json:"unchecked_steps"`
	MaxAbsDiff   float64     `json:"max_abs_diff"`
	RowsPerSec   float64     `json:"rows_per_second"`
	CostRatio    float64     `json:"cost_ratio,omitempty"` // replay time / original wall time, rows with wall_ms
	Warnings     []string    `json:"warnings,omitempty"`
	Results      []RowResult `json:"results"`
	ElapsedSecs  float64     `json:"elapsed_seconds"`
}

// Replay verifies the record's pins against the rescorer's stack, then
// re-scores the selected rows and compares each with the record. A stack
// that differs yields Status StackDiffers and no row verdicts. The error is
// for a record that cannot be read or trusted (bad line, sum mismatch,
// unknown row ids) and for a cancelled ctx, with the partial summary.
func Replay(ctx context.Context, path string, rs Rescorer, opts ReplayOptions) (Summary, error) {
	s := Summary{Path: path, Tolerance: opts.Tolerance, Selection: "all"}
	var err error
	if s.SHA256, err = checkReplayRequest(path, opts); err != nil {
		return s, err
	}
	rd, err := OpenReader(path)
	if err != nil {
		return s, fmt.Errorf("replay: %w", err)
	}
	defer rd.Close()
	s.Pins = rd.Header().Pins
	current, err := rs.Stack(ctx)
	if err != nil {
		return s, fmt.Errorf("replay %s: read the replaying stack's pins: %w", path, err)
	}
	if diffs := StackDiff(s.Pins, current); len(diffs) > 0 {
		s.Status, s.StackDiffs = StatusStackDiffers, diffs
		return s, nil
	}

	want := selectRows(opts, &s)
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	var picked []linedRow
	start := time.Now()
	rp := &rowReplayer{ctx: ctx, rs: rs, tolerance: opts.Tolerance, s: &s}
	finish := func() Summary { return s.finish(start, rp.replayTime, rp.origTime, rp.origReplay) }
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var torn *TornLineError
		if errors.As(err, &torn) {
			s.Warnings = append(s.Warnings, torn.Error())
			break
		}
		if err != nil {
			return s, fmt.Errorf("replay: %w", err)
		}
		s.RecordRows++
		switch {
		case len(opts.Rows) > 0:
			if want[row.RowID] {
				picked = append(picked, linedRow{row, rd.Line()})
				delete(want, row.RowID)
			}
		case opts.Sample > 0:
			// Reservoir sampling keeps memory at Sample rows.
			if len(picked) < opts.Sample {
				picked = append(picked, linedRow{row, rd.Line()})
			} else if j := rng.IntN(s.RecordRows); j < opts.Sample {
				picked[j] = linedRow{row, rd.Line()}
			}
		default:
			if err := rp.replay(row, rd.Line()); err != nil {
				return finish(), err
			}
		}
	}
	if len(want) > 0 {
		return s, missingRowsError(path, want)
	}
	if opts.Sample > s.RecordRows {
		s.Warnings = append(s.Warnings, fmt.Sprintf("sample of %d asked, the record has %d rows: replaying all", opts.Sample, s.RecordRows))
	}
	sort.Slice(picked, func(i, j int) bool { return picked[i].line < picked[j].line })
	for _, p := range picked {
		if err := rp.replay(p.row, p.line); err != nil {
			return finish(), err
		}
	}
	return finish(), nil
}

// checkReplayRequest refuses a selection that asks for both a sample and
// row ids, or a negative sample, checks the record against the sum asked
// for, and returns its own sum.
func checkReplayRequest(path string, opts ReplayOptions) (string, error) {
	if opts.Sample > 0 && len(opts.Rows) > 0 {
		return "", fmt.Errorf("replay %s: choose either a sample (%d rows) or row ids, not both", path, opts.Sample)
	}
	if opts.Sample < 0 {
		return "", fmt.Errorf("replay %s: sample size %d is negative", path, opts.Sample)
	}
	if opts.WantSum != "" {
		if err := VerifySum(path, opts.WantSum); err != nil {
			return "", err
		}
	}
	sum, err := SumFile(path)
	if err != nil {
		return sum, fmt.Errorf("replay: %w", err)
	}
	return sum, nil
}

// selectRows describes opts' selection in s and returns the row ids it asks
// for, to be struck off as the record yields them.
func selectRows(opts ReplayOptions, s *Summary) map[string]bool {
	want := map[string]bool{}
	for _, id := range opts.Rows {
		want[id] = true
	}
	switch {
	case len(opts.Rows) > 0:
		s.Selection = fmt.Sprintf("rows %s", strings.Join(opts.Rows, ","))
	case opts.Sample > 0:
		s.Selection, s.Seed = fmt.Sprintf("sample %d", opts.Sample), opts.Seed
	}
	return want
}

// linedRow is a row picked for replay with its line in the record.
type linedRow struct {
	row  Row
	line int
}

// missingRowsError names, sorted, the asked-for row ids the record lacks.
func missingRowsError(path string, want map[string]bool) error {
	missing := make([]string, 0, len(want))
	for id := range want {
		missing = append(missing, id)
	}
	sort.Strings(missing)
	return fmt.Errorf("replay %s: row ids not in the record: %s (list ids with `rig replay --list`, or check the record's path)", path, strings.Join(missing, ", "))
}

// rowReplayer re-scores rows one at a time, appending each verdict to s and
// keeping the times the summary's speed and cost figures come from.
type rowReplayer struct {
	ctx       context.Context
	rs        Rescorer
	tolerance Tolerance
	s         *Summary

	replayTime, origTime, origReplay time.Duration
}

// replay re-scores row (at line of the record) and records its verdict. The
// error is ctx's alone; a row that fails to re-score is a verdict.
func (p *rowReplayer) replay(row Row, line int) error {
	ctx := p.ctx
	if err := ctx.Err(); err != nil {
		return err
	}
	t0 := time.Now()
	steps, err := p.rs.Rescore(ctx, row)
	dt := time.Since(t0)
	p.replayTime += dt
	r := RowResult{RowID: row.RowID, Line: line, Arm: row.Arm, Role: row.Role, ReplayMS: ms(dt), WallMS: row.WallMS}
	if err == nil {
		// The kept text and prompt must be what the tokens say: an
		// edit of the text alone leaves every log-prob as it was.
		tk, _ := p.rs.(Tokenizer)
		checks, fm, ferr := CheckFields(ctx, row, tk)
		err = ferr
		if err == nil {
			r.Comparison = CompareRow(row, steps, p.tolerance, p.s.Pins.GreedyIsArgmax()).WithField(checks, fm)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.Status, r.Error = StatusError, err.Error()
	} else {
		r.Status = StatusMismatch
		if r.Comparison.Reproduced {
			r.Status = StatusReproduced
		}
		if row.WallMS > 0 {
			p.origTime += time.Duration(row.WallMS * float64(time.Millisecond))
			p.origReplay += dt
		}
	}
	p.s.Results = append(p.s.Results, r)
	return nil
}

func (s Summary) finish(start time.Time, replay, orig, origReplay time.Duration) Summary {
	s.ElapsedSecs = time.Since(start).Seconds()
	s.Replayed = len(s.Results)
	for _, r := range s.Results {
		switch r.Status {
		case StatusReproduced:
			s.Reproduced++
		case StatusMismatch:
			s.Mismatched++
		case StatusError:
			s.Errors++
		}
		s.Unchecked += r.Comparison.Unchecked
		if r.Comparison.MaxAbsDiff > s.MaxAbsDiff {
			s.MaxAbsDiff = r.Comparison.MaxAbsDiff
		}
	}
	if replay > 0 {
		s.RowsPerSec = float64(s.Replayed) / replay.Seconds()
	}
	if orig > 0 {
		s.CostRatio = origReplay.Seconds() / orig.Seconds()
	}
	switch {
	case s.Mismatched > 0:
		s.Status = StatusMismatch
	case s.Errors > 0:
		s.Status = StatusError
	default:
		s.Status = StatusReproduced
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// JSON returns the summary as indented JSON.
func (s Summary) JSON() ([]byte, error) { return json.MarshalIndent(s, "", "  ") }

// WriteText prints one line per row and a summary line.
func (s Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	if s.Status == StatusStackDiffers {
		fmt.Fprintf(&b, "replay %s: stack differs (not a pass or a fail of the text: the replaying stack is not the one that made the record)\n", s.Path)
		for _, d := range s.StackDiffs {
			fmt.Fprintf(&b, "  %s\n", d)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "replay %s (sha256 %s, %s on %s): %s of %d rows, tolerance per-token %.6g nats, per-row mean %.6g nats\n",
		s.Path, short(s.SHA256), s.Pins.ModelName, s.Pins.Runtime, s.Selection, s.RecordRows, s.Tolerance.Token, s.Tolerance.Row)
	if s.ToleranceSource != "" {
		fmt.Fprintf(&b, "tolerance from %s\n", s.ToleranceSource)
	}
	if s.Mode != "" {
		fmt.Fprintf(&b, "mode %s", s.Mode)
		if s.Stack != "" {
			fmt.Fprintf(&b, " on %s", s.Stack)
		}
		b.WriteString("\n")
	}
	if s.ReceiptCheck != "" {
		fmt.Fprintf(&b, "sha256 checked: %s\n", s.ReceiptCheck)
	}
	for _, r := range s.Results {
		fmt.Fprintf(&b, "row %s (line %d, %s, %s, %d steps", r.RowID, r.Line, r.Arm, r.Role, r.Comparison.Steps)
		if r.Method != "" {
			fmt.Fprintf(&b, ", %s", r.Method)
		}
		b.WriteString("): ")
		switch r.Status {
		case StatusReproduced:
			fmt.Fprintf(&b, "reproduced (max |Δ| %.6g nats", r.Comparison.MaxAbsDiff)
			if r.Comparison.Unchecked > 0 {
				fmt.Fprintf(&b, ", %d steps unchecked: no log-prob on one side", r.Comparison.Unchecked)
			}
			b.WriteString(")\n")
		case StatusMismatch:
			if r.Comparison.First != nil {
				fmt.Fprintf(&b, "%s\n", r.Comparison.First)
			} else {
				b.WriteString("mismatch: no step could be checked (every step lacks a log-prob on one side)\n")
			}
		default:
			fmt.Fprintf(&b, "error: %s\n", r.Error)
		}
	}
	for _, wn := range s.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", wn)
	}
	fmt.Fprintf(&b, "summary: %s — %d replayed, %d reproduced, %d mismatched, %d errors; max |Δ| %.6g nats; %d steps unchecked; %.3g rows/s",
		s.Status, s.Replayed, s.Reproduced, s.Mismatched, s.Errors, s.MaxAbsDiff, s.Unchecked, s.RowsPerSec)
	if s.CostRatio > 0 {
		fmt.Fprintf(&b, "; replay cost %.3g× the original generation", s.CostRatio)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
