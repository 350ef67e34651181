package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"rig/receipts"
	"rig/studies"
)

const lcDesignHash = "2222222222222222222222222222222222222222222222222222222222222222"

func lcService(t *testing.T, home string) *Service {
	t.Helper()
	s, err := NewService(home, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// lcCreate records a study as Register does once its checks pass, and
// returns the lifecycle it started with.
func lcCreate(t *testing.T, s *Service, name string) *studies.Lifecycle {
	t.Helper()
	at := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	l := studies.NewLifecycle(lcDesignHash, "alice", at)
	if err := s.Studies().create(context.Background(), &studies.Registration{Name: name, DesignHash: lcDesignHash, Lifecycle: l}, "alice", "registered from test"); err != nil {
		t.Fatal(err)
	}
	var copy studies.Lifecycle
	raw, _ := json.Marshal(l)
	if err := json.Unmarshal(raw, &copy); err != nil {
		t.Fatal(err)
	}
	return &copy
}

// lcEvents take a registered study through a failing and a passing review,
// approval, freeze and one finished execution.
func lcEvents() []studies.Event {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	review := func(verdict string) *studies.Review {
		return &studies.Review{Reviewer: "rita", Verdict: verdict, LicenceLine: "licences: 7 items checked against registry.json, no banned use", DesignHash: lcDesignHash}
	}
	return []studies.Event{
		{Kind: studies.EventReview, Actor: "rita", At: at, Why: "first look", Review: review("fail")},
		{Kind: studies.EventReview, Actor: "rita", At: at.Add(time.Minute), Why: "fixed", Review: review("pass")},
		{Kind: studies.EventApprove, Actor: "dana", At: at.Add(2 * time.Minute), Why: "go"},
		{Kind: studies.EventFreeze, Actor: "dana", At: at.Add(3 * time.Minute), SnapshotHash: strings.Repeat("3", 64), Why: "frozen"},
		{Kind: studies.EventRun, Actor: "dana", At: at.Add(4 * time.Minute), Execution: "exec-1", Why: "run exec-1"},
		{Kind: studies.EventFinish, Actor: "rig daemon", At: at.Add(5 * time.Minute), Execution: "exec-1", Why: "finished"},
	}
}

func TestLifecycleLivesInTheStore(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	s := lcService(t, home)
	want := lcCreate(t, s, "s1")
	for _, ev := range lcEvents() {
		if _, err := want.Apply(ev); err != nil {
			t.Fatal(err)
		}
		if _, err := s.apply(ctx, "s1", ev); err != nil {
			t.Fatalf("%s: %v", ev.Kind, err)
		}
	}
	got, err := s.lifecycle("s1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lifecycle read back:\n%+v\nwant what was applied:\n%+v", got, want)
	}
	if _, err := os.Stat(studyDir(t, s, "s1").LegacyLifecycle()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lifecycle.json written (stat: %v); the store is the one place", err)
	}
	// The store's audit has every change of state, and its header the freeze.
	st, _ := s.store("s1")
	audit, err := st.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, a := range audit {
		path = append(path, a.To)
	}
	if strings.Join(path, " ") != "draft reviewed approved frozen running frozen" {
		t.Errorf("store audit %v", path)
	}
	if m, _ := st.Meta(ctx); !m.Frozen || m.DesignHash != lcDesignHash {
		t.Errorf("store meta %+v, want frozen under the design hash", m)
	}
	// Another daemon on the same home reads the same lifecycle.
	s.Close()
	again, err := lcService(t, home).lifecycle("s1")
	if err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("after reopening: %+v, %v", again, err)
	}
}

func TestLifecycleRefusesAStaleWriter(t *testing.T) {
	ctx := context.Background()
	s := lcService(t, t.TempDir())
	lcCreate(t, s, "s1")
	_, prev, st, err := s.readLifecycle(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	ev := lcEvents()[0] // a failing review moves no state: only the document guards it
	if _, err := s.apply(ctx, "s1", ev); err != nil {
		t.Fatal(err)
	}
	err = st.PutLifecycle(ctx, receipts.LifecycleChange{Prev: prev, Doc: prev})
	if !errors.Is(err, receipts.ErrStaleState) {
		t.Errorf("write from a stale read = %v, want ErrStaleState", err)
	}
}

func TestLifecycleJSONImportedOnce(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	// A study as the previous rig wrote it: the lifecycle in lifecycle.json,
	// its transitions mirrored in the store.
	legacy := studies.NewLifecycle(lcDesignHash, "alice", time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC))
	evs := lcEvents()
	for _, ev := range evs[:4] {
		if _, err := legacy.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(home, "studies", "old")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := receipts.Open(filepath.Join(dir, "store.bolt"), "old")
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range [][2]string{{"", "draft"}, {"draft", "reviewed"}, {"reviewed", "approved"}} {
		if err := st.Transition(ctx, receipts.Transition{From: tr[0], To: tr[1], Who: "x", Why: "y"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Freeze(ctx, lcDesignHash, receipts.Transition{From: "approved", To: "frozen", Who: "x", Why: "y"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	raw, _ := json.MarshalIndent(legacy, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "lifecycle.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "registration.json"), []byte(`{"name":"old"}`), 0o400); err != nil {
		t.Fatal(err)
	}

	s := lcService(t, home)
	got, err := s.lifecycle("old")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, legacy) {
		t.Errorf("imported lifecycle:\n%+v\nwant lifecycle.json's:\n%+v", got, legacy)
	}
	if _, err := os.Stat(filepath.Join(dir, "lifecycle.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lifecycle.json still in place after the import (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "lifecycle.json.imported")); err != nil {
		t.Errorf("the imported file is not kept aside: %v", err)
	}
	// The imported study goes on from the store.
	if _, err := legacy.Apply(evs[4]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.apply(ctx, "old", evs[4]); err != nil {
		t.Fatal(err)
	}
	// A lifecycle.json appearing again is not read: the store has one.
	if err := os.WriteFile(filepath.Join(dir, "lifecycle.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s.Close()
	again, err := lcService(t, home).lifecycle("old")
	if err != nil || !reflect.DeepEqual(again, legacy) || again.State != studies.Running {
		t.Errorf("after reopening: %+v, %v; want the store's running lifecycle", again, err)
	}
}
