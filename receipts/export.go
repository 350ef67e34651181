package receipts

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Format is an export format.
type Format string

// The export formats.
const (
	JSONL Format = "jsonl"
	CSV   Format = "csv"
)

// ParseFormat reads a --format flag value.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case JSONL, CSV:
		return Format(s), nil
	}
	return "", fmt.Errorf("export format %q: %w (use jsonl or csv)", s, ErrInvalid)
}

// Columns is the CSV header of the shared schema, in order. Pins are one
// column holding a JSON object, so the header stays the same for every study.
func Columns() []string {
	return []string{"schema_version", "study_id", "execution_id", "design_hash",
		"arm", "job_kind", "task_id", "repeat", "attempt", "parent_attempt", "outcome",
		"model_name", "model_digest", "runtime", "harness", "harness_version", "pins",
		"effort_raw_parameter", "effort_value", "effort_graded",
		"input_tokens", "thinking_tokens", "output_tokens", "truncated", "stop_reason",
		"wall_ms", "peak_memory_bytes", "peak_gpu_memory_bytes", "energy_joules",
		"graded", "grade_score", "grade_pass", "grader", "grader_version",
		"machine", "no_sandbox", "generation_sha256", "detail", "started_at", "finished_at"}
}

func csvRow(r Receipt) ([]string, error) {
	pins, err := json.Marshal(r.Pins)
	if err != nil {
		return nil, err
	}
	b := strconv.FormatBool
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	graded, score, pass, grader, gv := "false", "", "", "", ""
	if r.Grade != nil {
		graded, score, pass, grader, gv = "true", f(r.Grade.Score), b(r.Grade.Pass), r.Grade.Grader, r.Grade.GraderVersion
	}
	return []string{itoa(int64(r.SchemaVersion)), r.StudyID, r.ExecutionID, r.DesignHash,
		r.Arm, r.JobKind, r.TaskID, itoa(int64(r.Repeat)), itoa(int64(r.Attempt)), itoa(int64(r.ParentAttempt)), string(r.Outcome),
		r.ModelName, r.ModelDigest, r.Runtime, r.Harness, r.HarnessVersion, string(pins),
		r.Effort.RawParameter, r.Effort.Value, b(r.Effort.Graded),
		itoa(int64(r.InputTokens)), itoa(int64(r.ThinkingTokens)), itoa(int64(r.OutputTokens)), b(r.Truncated), r.StopReason,
		itoa(r.WallMS), itoa(r.PeakMemoryBytes), itoa(r.PeakGPUMemoryBytes), f(r.EnergyJoules),
		graded, score, pass, grader, gv,
		r.Machine, b(r.NoSandbox), r.GenerationSHA256, r.Detail, ts(r.StartedAt), ts(r.FinishedAt)}, nil
}

// Export writes every receipt of the store in the shared schema: one JSON
// object per line (JSONL) or a CSV with the Columns header. Every row carries
// schema_version so a later study can read old exports safely.
func (s *Store) Export(ctx context.Context, w io.Writer, format Format) error {
	switch format {
	case JSONL:
		enc := json.NewEncoder(w)
		return s.eachReceipt(ctx, "", func(r Receipt) error {
			return enc.Encode(r)
		})
	case CSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(Columns()); err != nil {
			return err
		}
		err := s.eachReceipt(ctx, "", func(r Receipt) error {
			row, err := csvRow(r)
			if err != nil {
				return err
			}
			return cw.Write(row)
		})
		if err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	}
	_, err := ParseFormat(string(format))
	return err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
