package governor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultPassMaxAge is how old the last fault-suite pass may be before
// counted runs refuse to start.
const DefaultPassMaxAge = 24 * time.Hour

const passPrefix = "governor-faults-"

// Record is one fault-suite run as stored in the state directory, one dated
// file per run; only a record with Pass true opens the study gate.
type Record struct {
	At       time.Time     `json:"at"`
	Pass     bool          `json:"pass"`
	Host     string        `json:"host"`
	NVML     string        `json:"nvml"` // "real" or why it ran simulated
	Runtime  string        `json:"runtime"`
	Config   string        `json:"config"`
	Classes  []ClassResult `json:"classes"`
	Failures []string      `json:"failures,omitempty"`
}

// ClassResult is one fault class's outcome over its repetitions.
type ClassResult struct {
	Class       string    `json:"class"`
	Expected    string    `json:"expected"`
	Observed    []string  `json:"observed"` // distinct observed actions
	Source      string    `json:"source"`
	Reps        int       `json:"reps"`
	LatencyMS   []float64 `json:"latency_ms"`
	P50MS       float64   `json:"p50_ms"`
	P99MS       float64   `json:"p99_ms"`
	Marked      bool      `json:"marked"`       // preempted, not scored, every rep
	Rerun       bool      `json:"rerun"`        // a scored rerun with the parent, every rep
	NothingLost bool      `json:"nothing_lost"` // every trial scored once, no partial files, events recorded
	Skipped     string    `json:"skipped,omitempty"`
	Errors      []string  `json:"errors,omitempty"`
	Pass        bool      `json:"pass"`
}

// WriteRecord stores r as <dir>/governor-faults-<UTC time>.json, where
// LastPass finds it; it returns the path.
func WriteRecord(dir string, r Record) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, passPrefix+r.At.UTC().Format("20060102T150405.000Z")+".json")
	return path, writeFileAtomic(path, append(b, '\n'))
}

// LastPass returns the newest passing record in dir. It fails with a
// *StaleError (errors.Is ErrStale) when there is none.
func LastPass(dir string) (Record, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Record{}, err
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, passPrefix) && strings.HasSuffix(n, ".json") {
			names = append(names, n)
		}
	}
	// The names carry a fixed-width UTC time, so newest sorts last.
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return Record{}, err
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return Record{}, fmt.Errorf("%s: %w (delete it or rerun `rig governor faults`)", filepath.Join(dir, n), err)
		}
		if r.Pass {
			return r, nil
		}
	}
	return Record{}, &StaleError{What: "governor fault-injection pass in " + dir, Fix: "run `rig governor faults` and fix what it reports"}
}

// CheckFresh returns nil when the last pass in dir is at most maxAge old
// (DefaultPassMaxAge when maxAge is 0), else a *StaleError.
func CheckFresh(dir string, maxAge time.Duration, now time.Time) error {
	if maxAge <= 0 {
		maxAge = DefaultPassMaxAge
	}
	r, err := LastPass(dir)
	if err != nil {
		return err
	}
	if now.Sub(r.At) > maxAge {
		return &StaleError{What: "governor fault-injection pass", Last: r.At, Max: maxAge, Fix: "run `rig governor faults` (deploy/systemd's timer does this twice a day)"}
	}
	return nil
}

// ReadyForCounted is the governor's part of the gate before counted runs:
// a fault-suite pass no older than maxAge in stateDir, and a fresh heartbeat
// at heartbeatPath (written by the daemon's governor every interval). Both
// failures come back joined, each a *StaleError.
func ReadyForCounted(stateDir string, maxAge time.Duration, heartbeatPath string, interval time.Duration, now time.Time) error {
	return errors.Join(CheckFresh(stateDir, maxAge, now), CheckHeartbeat(heartbeatPath, interval, now))
}
