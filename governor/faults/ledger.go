package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"rig/governor"
	"rig/internal/atomicfile"
)

// attempt is one try at a trial as the fault suite's ledger records it: the
// same marking the study store makes (preempted, not scored, rerun with a
// parent), kept here so the suite can check it without the store.
type attempt struct {
	TrialID string               `json:"trial_id"`
	N       int                  `json:"n"`
	Parent  int                  `json:"parent,omitempty"` // attempt number this reruns, 0 for the first
	State   string               `json:"state"`            // running, done, preempted
	Scored  bool                 `json:"scored"`
	Cause   *governor.Preemption `json:"cause,omitempty"`
	At      time.Time            `json:"at"`
}

// ledger keeps one JSON file per attempt, each replaced atomically, so a
// crash or a full disk leaves every file either old or new.
type ledger struct {
	dir  string
	mu   sync.Mutex
	wrap func(io.Writer) io.Writer // fault injection: wraps the file writer
}

func openLedger(dir string) (*ledger, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &ledger{dir: dir}, nil
}

func (l *ledger) path(a attempt) string {
	return filepath.Join(l.dir, fmt.Sprintf("%s.%03d.json", a.TrialID, a.N))
}

func (l *ledger) put(a attempt) error {
	l.mu.Lock()
	wrap := l.wrap
	l.mu.Unlock()
	a.At = time.Now()
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	// Through internal/atomicfile, so a crash or a full disk leaves the old
	// file or the new one; wrap is how the disk-full class makes the write
	// fail half way.
	return atomicfile.Write(l.path(a), 0o600, func(w io.Writer) error {
		if wrap != nil {
			w = wrap(w)
		}
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

func (l *ledger) setWrap(w func(io.Writer) io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wrap = w
}

// start records a new attempt of trialID as running.
func (l *ledger) start(trialID string) (attempt, error) {
	all, err := l.load()
	if err != nil {
		return attempt{}, err
	}
	a := attempt{TrialID: trialID, N: 1, State: "running"}
	for _, x := range all {
		if x.TrialID == trialID && x.N >= a.N {
			a.N = x.N + 1
			a.Parent = x.N
		}
	}
	return a, l.put(a)
}

func (l *ledger) finish(a attempt) error {
	a.State, a.Scored = "done", true
	return l.put(a)
}

func (l *ledger) preempted(a attempt, c *governor.Preemption) error {
	a.State, a.Scored, a.Cause = "preempted", false, c
	return l.put(a)
}

// recover marks attempts left running by a daemon that died as preempted
// (by the host), so they are rerun and never scored from half a run.
func (l *ledger) recover() ([]attempt, error) {
	all, err := l.load()
	if err != nil {
		return nil, err
	}
	var fixed []attempt
	for _, a := range all {
		if a.State == "running" {
			c := &governor.Preemption{TrialID: a.TrialID, Policy: "host", Reason: "daemon stopped while the trial ran", At: time.Now()}
			if err := l.preempted(a, c); err != nil {
				return nil, err
			}
			fixed = append(fixed, a)
		}
	}
	return fixed, nil
}

// pending lists trials among ids with no scored attempt: the rerun queue.
func (l *ledger) pending(ids []string) ([]string, error) {
	all, err := l.load()
	if err != nil {
		return nil, err
	}
	scored := map[string]bool{}
	for _, a := range all {
		if a.Scored {
			scored[a.TrialID] = true
		}
	}
	var out []string
	for _, id := range ids {
		if !scored[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// load reads every attempt; a file that does not parse is an error, since
// the ledger never leaves partial files.
func (l *ledger) load() ([]attempt, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var out []attempt
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(l.dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var a attempt
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, fmt.Errorf("ledger %s: %w", e.Name(), err)
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TrialID != out[j].TrialID {
			return out[i].TrialID < out[j].TrialID
		}
		return out[i].N < out[j].N
	})
	return out, nil
}

// leftovers lists temporary files an interrupted write left behind.
func (l *ledger) leftovers() ([]string, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
