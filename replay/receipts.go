package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
)

// ReceiptSum is what one trial's receipt says of its arm's generation
// record: the sha256 of the whole record as that trial left it.
type ReceiptSum struct {
	Trial   string // arm|task|repeat, as receipts key it
	Attempt int
	SHA256  string
}

// RecordArm is the arm a record belongs to: its rows' arm, else the name
// in generations-ARM.jsonl.
func RecordArm(path string) (string, error) {
	rd, err := genrecord.OpenReader(path)
	if err != nil {
		return "", err
	}
	defer rd.Close()
	row, err := rd.Next()
	if err == nil && row.Arm != "" {
		return row.Arm, nil
	}
	var torn *genrecord.TornLineError
	if err != nil && !errors.Is(err, io.EOF) && !errors.As(err, &torn) {
		return "", err
	}
	if arm, ok := layout.ArmOfGeneration(path); ok {
		return arm, nil
	}
	return "", fmt.Errorf("%s: its first row names no arm, and its file name is not generations-ARM.jsonl (name the arm's receipts another way)", path)
}

// SumsOf keeps the receipts of arm that vouch for a record: a trial that
// made no call carries the sum of no bytes, and an older receipt none.
func SumsOf(rs []receipts.Receipt, arm string) []ReceiptSum {
	var out []ReceiptSum
	for _, r := range rs {
		if r.Arm != arm || r.GenerationSHA256 == "" || r.GenerationSHA256 == genrecord.EmptySum {
			continue
		}
		out = append(out, ReceiptSum{Trial: r.Trial().String(), Attempt: r.Attempt, SHA256: r.GenerationSHA256})
	}
	return out
}

// StoreSums reads, from the study's store at storePath, the receipts that
// vouch for the record at path (its header names the study and execution).
func StoreSums(ctx context.Context, storePath, path string) ([]ReceiptSum, error) {
	rd, err := genrecord.OpenReader(path)
	if err != nil {
		return nil, err
	}
	h := rd.Header()
	rd.Close()
	if h.Pins.StudyID == "" || h.Pins.ExecutionID == "" {
		return nil, fmt.Errorf("%s: the header names no study or execution (study_id %q, execution_id %q), so no receipt can vouch for it; replay it without --store", path, h.Pins.StudyID, h.Pins.ExecutionID)
	}
	// receipts.Open creates a store that is not there; a mistyped path must
	// be an error, not an empty store.
	if _, err := os.Stat(storePath); err != nil {
		return nil, fmt.Errorf("--store %s: %w (give the study's store.bolt, as rig study status prints it)", storePath, err)
	}
	st, err := receipts.Open(storePath, h.Pins.StudyID)
	if err != nil {
		if errors.Is(err, receipts.ErrLocked) {
			return nil, fmt.Errorf("%w; while the daemon runs, rig study report --replay-sample replays through it and checks the same receipts", err)
		}
		return nil, err
	}
	defer st.Close()
	if st.StudyID() != h.Pins.StudyID {
		return nil, fmt.Errorf("%s belongs to study %s, the record %s to study %s: give the record's own study's store", storePath, st.StudyID(), path, h.Pins.StudyID)
	}
	arm, err := RecordArm(path)
	if err != nil {
		return nil, err
	}
	rs, err := st.Receipts(ctx, h.Pins.ExecutionID)
	if err != nil {
		return nil, err
	}
	sums := SumsOf(rs, arm)
	if len(sums) == 0 {
		return nil, fmt.Errorf("%s holds no receipt of arm %s in execution %s that records a generation sha256, so nothing vouches for %s (is it this execution's record?)", storePath, arm, h.Pins.ExecutionID, path)
	}
	return sums, nil
}

// CheckReceipts checks a record against the sums its trials' receipts
// recorded. The record is append-only, so each receipt's sum must be that of
// the record cut at some line (an edited line breaks every receipt from it
// on), and the newest, the one covering the most lines, must be the whole
// file's (rows after it, or a cut at a line boundary, break that). A
// difference names both digests. It returns the file's sha256 and a line
// saying what matched.
func CheckReceipts(path string, sums []ReceiptSum) (sum, matched string, err error) {
	if len(sums) == 0 {
		return "", "", fmt.Errorf("%s: no receipt sha256 to check it against", path)
	}
	lineSums, whole, err := genrecord.LineSums(path)
	if err != nil {
		return "", "", err
	}
	at := make(map[string]int, len(lineSums))
	for i, s := range lineSums {
		at[s] = i + 1
	}
	newest, newestLines := ReceiptSum{}, 0
	for _, r := range sums {
		want := strings.ToLower(strings.TrimPrefix(r.SHA256, "sha256:"))
		n, ok := at[want]
		if !ok {
			return whole, "", fmt.Errorf("%s: %w: the receipt of trial %s attempt %d recorded sha256 %s, but the record cut at no line hashes to it (the file's sha256 is %s): a line that receipt vouched for was edited or removed; replay the record the receipt was written for",
				path, genrecord.ErrSumMismatch, r.Trial, r.Attempt, want, whole)
		}
		if n > newestLines {
			newest, newestLines = r, n
		}
	}
	if newestLines != len(lineSums) || whole != lineSums[len(lineSums)-1] {
		return whole, "", fmt.Errorf("%s: %w: the file's sha256 is %s, its newest receipt (trial %s attempt %d) recorded %s, which covers lines 1-%d of %d: lines were added after every receipt (or a torn line remains); replay the record as the receipt has it",
			path, genrecord.ErrSumMismatch, whole, newest.Trial, newest.Attempt, newest.SHA256, newestLines, len(lineSums))
	}
	return whole, fmt.Sprintf("%s is what the receipt of trial %s attempt %d recorded (%d receipts, each a prefix of the record)", whole, newest.Trial, newest.Attempt, len(sums)), nil
}
