package scaleout

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"rig/internal/layout"
	"rig/receipts"
	"rig/studies"
)

// The coordinator's queue is named by its home's identity, not the host;
// a workflow submitted on the host-named queue of before is still served;
// and a clean stop while an execution runs leaves it running (the
// follower ends without recording it failed), for the restarted daemon.
func TestCoordinatorMovesWithItsHomeOnDevServer(t *testing.T) {
	_, f, spool := mergeFixture(t)
	ctx := context.Background()
	s := startDevServer(t)
	home := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := NewCoordinator(ctx, Config{Address: s.Address(), Spool: spool}, home, f, quiet)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			c.Close()
		}
	})
	id, err := layout.Home(home).Identity()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if c.Queue() != "rig.coordinator."+id || strings.Contains(c.Queue(), host) {
		t.Errorf("coordinator queue %q; want rig.coordinator.%s, with no host name (%s) in it", c.Queue(), id, host)
	}

	// An honest worker; the last trial waits until released, so the run
	// is still going when the daemon stops.
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	d, err := f.snap.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]string{"capital": "Paris", "sum": "4"}
	honest := func(ctx context.Context, in TrialInput) (TrialResult, error) {
		key, err := studies.ParseTrialKey(in.Key)
		if err != nil {
			return TrialResult{}, err
		}
		if key.Task == "sum" && key.Repeat == 2 {
			select {
			case <-release:
			case <-ctx.Done():
				return TrialResult{}, ctx.Err()
			}
		}
		return writeEntryOf(t, spool, key, in.Attempt, "w1", answers[key.Task], nil), nil
	}
	cl, err := Config{Address: s.Address(), Spool: spool}.Dial(ctx, "test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	tw := worker.New(cl, Queue("llama-server", binarySHA, ArmCardClass(d, *d.Arm("a"))), worker.Options{DisableWorkflowWorker: true})
	RegisterTrialActivity(tw, honest)
	// The fake worker takes 4 at once, as a rig worker would advertise.
	advertiseFake(t, spool, "w1", map[string]int{Queue("llama-server", binarySHA, ArmCardClass(d, *d.Arm("a"))): 4})
	if err := tw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Stop)

	// Submitted as a daemon of before would: on the host-named queue.
	old := HostCoordinatorQueue(home)
	in := StudyInput{Study: "s1", Execution: "exec-2", DesignHash: f.snap.DesignHash, Coordinator: old, Chunk: 10, InFlight: 4, ChunksAtOnce: 1, StartWait: time.Minute}
	if _, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(in.Study, in.Execution), TaskQueue: old}, StudyWorkflowName, in); err != nil {
		t.Fatal(err)
	}
	e, err := f.st.Execution(ctx, "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	endedKind := ""
	h, err := c.Follow("s1", e, func(_ context.Context, kind, _ string) { endedKind = kind })
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		counted, err := f.st.Counted(ctx, "exec-2")
		if err != nil {
			t.Fatal(err)
		}
		if len(counted) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 trials merged through the host-named queue %s within 2 minutes", len(counted), old)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if info := h.Info(); info.Done != 3 {
		t.Errorf("the follower counts %d done, want 3", info.Done)
	}

	c.Close()
	closed = true
	select {
	case <-h.Done():
	default:
		t.Error("Close returned before the follower ended")
	}
	got, err := f.st.Execution(ctx, "exec-2")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != receipts.Running || endedKind != "" {
		t.Errorf("after a clean stop the execution is %s (ended %q); want it still running on the engine", got.Status, endedKind)
	}
}
