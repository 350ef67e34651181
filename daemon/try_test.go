package daemon

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/api"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/studies/studytest"
)

// A try is blocked by the licence check as register is: an item the
// registry has no entry for stops it before any runtime starts, naming the
// item and the file; a task that is hold-out or absent cannot be tried.
func TestTryIsBlockedLikeRegister(t *testing.T) {
	_, err := provision.Load()
	testenv.NeedsSetup(t, "a provisioned machine (installed.env)", err)
	svc, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	var d map[string]any
	if err := json.Unmarshal(studytest.ReadDemo(t), &d); err != nil {
		t.Fatal(err)
	}
	d["items"] = append(d["items"].([]any), map[string]any{"role": "dataset", "name": "a bank nobody read the licence of", "registry_id": "no-such-entry", "use": "evaluation"})
	raw, _ := json.Marshal(d)
	file := filepath.Join(studytest.Root(t), "examples", "demo-study", "design.json")
	_, err = svc.Tries().Try(context.Background(), api.TryRequest{DesignFile: file, Design: raw})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "items") || !strings.Contains(err.Error(), "no-such-entry") || !strings.Contains(err.Error(), "design.json") {
		t.Errorf("a try of a design with an unregistered item = %v; want the licence check's refusal naming it", err)
	}
	if svc.tryPool != nil && svc.tryPool.Parked() != 0 {
		t.Error("a refused try left a runtime")
	}
	if recs, err := svc.Tries().List(); err != nil || len(recs) != 0 {
		t.Errorf("a refused try was kept: %v %v", recs, err)
	}
}

// Prune needs to be told what to remove, and an id from outside is checked
// before it becomes a path.
func TestTryPruneRefusesVagueAndForeign(t *testing.T) {
	svc, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := svc.Tries().Prune(api.TryPruneRequest{}, time.Now()); err == nil {
		t.Error("prune with nothing named was not refused")
	}
	if _, err := svc.Tries().Prune(api.TryPruneRequest{ID: "../studies"}, time.Now()); err == nil || !strings.Contains(err.Error(), "try id") {
		t.Errorf("prune of a path-like id = %v; want the id refused", err)
	}
}
