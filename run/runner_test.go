package run

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
)

// fakeOpenGates is a fake: gates that are always ready and never preempt.
// The governor's own gates are tested in governor and daemon; here the
// runner's path from a snapshot to receipts is under test.
type fakeOpenGates struct{}

func (fakeOpenGates) Ready(context.Context) error { return nil }

func (fakeOpenGates) Watch(context.Context, string, *runtimes.Sandbox, uint64) (TrialGuard, error) {
	return fakeGuard{}, nil
}

type fakeGuard struct{}

func (fakeGuard) Preempted() <-chan struct{} { return nil }
func (fakeGuard) End() string                { return "" }

// The runner needs no daemon: this test freezes a two-arm slice of the demo
// study with the runner's own asset resolver, opens a store, and runs the
// execution through Start alone on the real llama-server and models. Every
// planned trial gets a counted receipt, and each arm's generation record
// reads back with one row per trial.
func TestRunnerRunsAnExecutionWithNoDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the real llama-server (drop -short to run it)")
	}
	in, err := provision.Load()
	if err != nil {
		t.Skipf("needs rig's provisioned runtimes and models (run: make setup): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, snap, d, dir := freezeDemoSlice(t, ctx, in, nil)
	st, exec := frozenExecution(t, ctx, dir, d, snap, "frozen for the runner test")
	var endedKind string
	var told []receipts.Receipt // Env.Stored: what the daemon's metrics are told
	var toldMu sync.Mutex
	env.Stored = func(r receipts.Receipt) { toldMu.Lock(); told = append(told, r); toldMu.Unlock() }
	h := runToEnd(t, ctx, env, Spec{Study: d.Name, Snapshot: snap, Store: st, Exec: exec, Dir: filepath.Join(dir, "executions", exec.ID),
		Ended: func(_ context.Context, kind, _ string) { endedKind = kind }})
	info := h.Info()
	if info.Status != string(receipts.Done) || info.Error != "" || endedKind != studies.EventFinish {
		t.Fatalf("execution ended %s (%s), told %q", info.Status, info.Error, endedKind)
	}
	want := len(d.Arms) * 2
	if info.Planned != want || info.Done != want {
		t.Fatalf("planned %d, done %d, want %d each", info.Planned, info.Done, want)
	}
	counted, err := st.Counted(ctx, exec.ID)
	if err != nil || len(counted) != want {
		t.Fatalf("%d counted receipts (%v), want %d", len(counted), err, want)
	}
	toldMu.Lock()
	if len(told) != want || told[0].WallMS <= 0 {
		t.Errorf("Env.Stored was told of %d receipts (first %+v), want the %d stored", len(told), told, want)
	}
	toldMu.Unlock()
	// Every receipt carries the containment read back inside its runtime.
	for _, r := range counted {
		if r.Pins["loopback_only"] != "true" || !strings.Contains(r.Pins["containment"], "no_new_privs=true, capabilities none") || !strings.HasPrefix(r.Pins["interfaces"], "lo ") {
			t.Fatalf("receipt %s/%s holds no containment read-back: %v", r.Arm, r.TaskID, r.Pins)
		}
	}
	for _, a := range d.Arms {
		name := a.Name
		_, rows, err := genrecord.ReadAll(filepath.Join(info.Records, "generations-"+name+".jsonl"))
		if err != nil || len(rows) != 2 {
			t.Errorf("arm %s: %d generation rows (%v), want 2", name, len(rows), err)
		}
	}
}

// freezeDemoSlice freezes the demo study's llama-server arms on two tasks of
// its extract-json bank, as the runner's own asset resolver does; edit may
// change the design before it is written.
func freezeDemoSlice(t *testing.T, ctx context.Context, in provision.Installed, edit func(map[string]any)) (Env, *studies.Snapshot, *studies.Design, string) {
	t.Helper()
	var m map[string]any
	raw, err := os.ReadFile("../examples/demo-study/design.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var arms []any
	for _, a := range m["arms"].([]any) {
		if a.(map[string]any)["runtime"] == "llama-server" {
			arms = append(arms, a)
		}
	}
	m["arms"] = arms
	jk := m["job_kinds"].([]any)[0].(map[string]any)
	bank, _ := filepath.Abs("../tasks/banks/extract-json.jsonl")
	jk["task_bank"], jk["sample_tasks"] = bank, 2
	m["job_kinds"] = []any{jk}
	m["name"] = "runner-alone"
	m["allow_paths_outside"] = true // the design is in a temporary folder; the bank stays in the repository
	if edit != nil {
		edit(m)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "design.json")
	b, _ := json.Marshal(m)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	lookup, err := provision.Lookup()
	if err != nil {
		t.Fatal(err)
	}
	opts := studies.ValidateOptions{File: file, Lookup: lookup, BaseDir: dir, Quant: studies.GGUFQuant}
	d, err := studies.LoadDesign(ctx, file, opts)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Gates: fakeOpenGates{}, Installed: in}
	snap, err := studies.Freeze(ctx, studies.FreezeInput{Design: d, Validate: opts}, env.Assets())
	if err != nil {
		t.Fatal(err)
	}
	return env, snap, d, dir
}

// runToEnd starts the execution spec names and waits until it ends; past
// ctx's deadline it cancels it and fails the test.
func runToEnd(t *testing.T, ctx context.Context, env Env, spec Spec) *Handle {
	t.Helper()
	h, err := Start(env, spec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		h.Cancel()
		t.Fatalf("execution %s did not end before the test's deadline", spec.Exec.ID)
	}
	return h
}

// frozenExecution opens the study's store in dir, freezes it at snap and
// records execution exec-1 as running, as the daemon does before it starts a
// run; the store closes with the test.
func frozenExecution(t *testing.T, ctx context.Context, dir string, d *studies.Design, snap *studies.Snapshot, why string) (*receipts.Store, receipts.Execution) {
	t.Helper()
	return frozenExecutionSeeded(t, ctx, dir, d, snap, why, uint64(studies.PlanSeed(snap.Hash, 1)))
}

// frozenExecutionSeeded is frozenExecution with the plan seed given: two
// designs that differ (so do their hashes) then run one plan.
func frozenExecutionSeeded(t *testing.T, ctx context.Context, dir string, d *studies.Design, snap *studies.Snapshot, why string, seed uint64) (*receipts.Store, receipts.Execution) {
	t.Helper()
	st, err := receipts.Open(filepath.Join(dir, "store.bolt"), d.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	exec := receipts.Execution{ID: "exec-1", Attempt: 1, Status: receipts.Running, DesignHash: snap.DesignHash,
		CreatedAt: time.Now().UTC(), PlanSeed: seed}
	if err := st.Freeze(ctx, snap.DesignHash, receipts.Transition{To: "frozen", Who: "test", Why: why, At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutExecution(ctx, exec); err != nil {
		t.Fatal(err)
	}
	return st, exec
}
