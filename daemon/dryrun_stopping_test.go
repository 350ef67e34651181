package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/internal/atomicfile"
	"rig/run"
	"rig/studies"
	"rig/studies/studytest"
)

// TestDryRunPricesTheStoppingRule: studies prices the plan and run
// simulates the stopping rule (studies imports no analysis), so the dry run
// of a frozen study with a rule is where the two meet: the estimate carries
// the rule's price and the table prints it, from this machine's speeds.
func TestDryRunPricesTheStoppingRule(t *testing.T) {
	ctx := context.Background()
	s := lcService(t, t.TempDir())
	d := studytest.DemoDesign(t)
	d.Stopping = &studies.Stopping{Method: studies.StopAnytime}
	dh, err := studies.DesignHash(d)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := studies.Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	const name = "stop-dry"
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	if err := s.Studies().create(ctx, &studies.Registration{Name: name, DesignHash: dh, Design: canon, Lifecycle: studies.NewLifecycle(dh, "alice", at)}, "alice", "registered from test"); err != nil {
		t.Fatal(err)
	}
	snap := &studies.Snapshot{Version: studies.SnapshotVersion, DesignHash: dh, Design: canon}
	for _, jk := range d.JobKinds {
		b := studies.FrozenBank{JobKind: jk.Name}
		for i := range 24 {
			b.Tasks = append(b.Tasks, fmt.Sprintf("%s-%02d", jk.Name, i))
		}
		snap.Banks = append(snap.Banks, b)
	}
	if snap.Hash, err = studies.Hash(snap); err != nil {
		t.Fatal(err)
	}
	sd := studyDir(t, s, name)
	if err := atomicfile.WriteJSON(sd.Snapshot(), snap, 0o400); err != nil {
		t.Fatal(err)
	}
	var vals []run.ValidationRecord
	for _, a := range d.Arms {
		vals = append(vals, run.ValidationRecord{Arm: a.Name, Pass: true,
			Speed: &studies.Speed{GenTokensPerSec: 100, PromptTokensPerSec: 1000, LoadSeconds: 2, Watts: 100, Source: studies.SourceMeasured}})
	}
	if err := os.MkdirAll(filepath.Dir(sd.ValidationRecord()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(sd.ValidationRecord(), vals, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	est, err := s.Studies().DryRun(ctx, name, "", &out)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out.String())
	}
	if est == nil || est.Stopping == nil || len(est.Stopping.Scenarios) == 0 || est.Stopping.MaxTrials != est.Trials {
		t.Fatalf("estimate %+v lacks the stopping rule's price", est)
	}
	table, _, _ := strings.Cut(out.String(), "dry run: nothing was executed")
	if !strings.Contains(table, "with the stopping rule (") || !strings.Contains(table, "under no difference: expected") {
		t.Errorf("the dry run's table lacks the stopping rule's price:\n%s", out.String())
	}
}
