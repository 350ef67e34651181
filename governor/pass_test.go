package governor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestLastPassAndCheckFresh(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	if err := CheckFresh(dir, 0, now); !errors.Is(err, ErrStale) {
		t.Fatalf("empty dir: %v", err)
	}
	for _, r := range []Record{
		{At: now.Add(-30 * time.Hour), Pass: true, Host: "old"},
		{At: now.Add(-2 * time.Hour), Pass: true, Host: "newest pass"},
		{At: now.Add(-1 * time.Hour), Pass: false, Host: "failed later"},
	} {
		if _, err := WriteRecord(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	r, err := LastPass(dir)
	if err != nil || r.Host != "newest pass" {
		t.Fatalf("LastPass = %+v, %v", r, err)
	}
	tests := []struct {
		maxAge time.Duration
		stale  bool
	}{{0, false}, {3 * time.Hour, false}, {time.Hour, true}}
	for _, tt := range tests {
		err := CheckFresh(dir, tt.maxAge, now)
		if errors.Is(err, ErrStale) != tt.stale {
			t.Errorf("maxAge %v: %v", tt.maxAge, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, passPrefix+"99999999T999999.999Z.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LastPass(dir); err == nil {
		t.Fatal("a corrupt newest record was skipped silently")
	}
}

func TestHeartbeatFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	now := time.Now()
	if err := CheckHeartbeat(path, time.Second, now); !errors.Is(err, ErrStale) {
		t.Fatalf("missing file: %v", err)
	}
	if err := WriteHeartbeat(path, now.Add(-2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := CheckHeartbeat(path, time.Second, now); err != nil {
		t.Fatalf("2s old with 1s interval: %v", err)
	}
	if err := CheckHeartbeat(path, time.Second, now.Add(2*time.Second)); !errors.Is(err, ErrStale) {
		t.Fatalf("4s old: %v", err)
	}
}

func TestGovernorWritesHeartbeatFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	g, err := New(Options{Config: SuiteConfig(), Sensors: allSimulated(), Sink: &eventLog{}, HeartbeatPath: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	go func() { _ = g.Run(ctx) }()
	waitFor(t, "heartbeat file", func() bool { return CheckHeartbeat(path, g.Config().Heartbeat, time.Now()) == nil })
}

func TestReadyForCounted(t *testing.T) {
	state, hb := t.TempDir(), filepath.Join(t.TempDir(), "heartbeat")
	now := time.Now()
	err := ReadyForCounted(state, 0, hb, time.Second, now)
	var se *StaleError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "rig governor faults") || !strings.Contains(err.Error(), "heartbeat") {
		t.Fatalf("nothing there: %v", err)
	}
	if _, err := WriteRecord(state, Record{At: now.Add(-time.Hour), Pass: true}); err != nil {
		t.Fatal(err)
	}
	if err := WriteHeartbeat(hb, now); err != nil {
		t.Fatal(err)
	}
	if err := ReadyForCounted(state, 0, hb, time.Second, now); err != nil {
		t.Fatalf("fresh pass and heartbeat: %v", err)
	}
	if err := ReadyForCounted(state, 30*time.Minute, hb, time.Second, now); !errors.Is(err, ErrStale) {
		t.Fatalf("pass older than maxAge: %v", err)
	}
}

// TestSlowHeartbeatFileDoesNotStallTheLoop: a heartbeat file whose write
// takes 2 s (a fake slow disk: a sync was seen to take 30 s under load)
// does not make the governor's own beat stale, so no trial is preempted
// as heartbeat-stale, and the gate stays open. The file is still written.
func TestSlowHeartbeatFileDoesNotStallTheLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeat")
	sink := &eventLog{}
	g, err := New(Options{Config: SuiteConfig(), Sensors: allSimulated(), Sink: sink, HeartbeatPath: path})
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int32
	g.writeBeat = func(path string, at time.Time) error {
		if writes.Add(1) > 1 {
			time.Sleep(2 * time.Second)
		}
		return WriteHeartbeat(path, at)
	}
	ctx := t.Context()
	go func() { _ = g.Run(ctx) }()
	waitFor(t, "the first heartbeat file", func() bool { return CheckHeartbeat(path, g.Config().Heartbeat, time.Now()) == nil })
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		if ok, why := g.MayStart(); !ok {
			t.Fatalf("the gate shut while the heartbeat file was slow to write: %s", why)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e, stale := sink.find(EventStale, ""); stale {
		t.Fatalf("the governor called itself stale while only its file was slow: %s", e.Reason)
	}
	if writes.Load() < 2 {
		t.Fatalf("%d heartbeat file writes in 3 s", writes.Load())
	}
}
