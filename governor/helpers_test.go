package governor

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
)

// eventLog is the tests' EventSink: it keeps every event for the checks.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) Emit(_ context.Context, e Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
	return nil
}

func (l *eventLog) find(kind EventKind, trialID string) (Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.evs {
		if e.Kind == kind && (trialID == "" || e.TrialID == trialID) {
			return e, true
		}
	}
	return Event{}, false
}

// writeCgroupV1 writes the v1 memory files the Cgroup sensor reads, so a
// test drives the real sensor code over a file tree it controls.
func writeCgroupV1(dir string, usage, peak uint64, oomKill int) error {
	files := map[string]string{
		"memory.usage_in_bytes":     fmt.Sprint(usage),
		"memory.max_usage_in_bytes": fmt.Sprint(peak),
		"memory.oom_control":        fmt.Sprintf("oom_kill_disable 0\nunder_oom 0\noom_kill %d\n", oomKill),
	}
	for n, v := range files {
		if err := writeFileAtomic(filepath.Join(dir, n), []byte(v+"\n")); err != nil {
			return err
		}
	}
	return nil
}
