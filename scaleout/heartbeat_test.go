package scaleout

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// hangingMerge is a coordinator whose merge never ends, in a daemon about
// to be killed: it heartbeats as the real coordinator's activities do, and
// says through a file that the merge has begun.
type hangingMerge struct {
	*fakeCoordinator
	began string
}

func (h hangingMerge) Merge(ctx context.Context, tr TrialResult) (MergeResult, error) {
	defer beat(ctx)()
	if err := os.WriteFile(h.began, []byte(tr.Key), 0o600); err != nil {
		return MergeResult{}, err
	}
	time.Sleep(time.Hour) // the process is killed first
	return MergeResult{}, nil
}

const hangingEnv = "RIG_TEST_HANGING_COORDINATOR"

var heartbeatTrials = []PlannedTrial{{Key: "a/jk/t0/1", Queue: "rig.test.hb", Attempt: 1}}

// TestHelperHangingCoordinator is the coordinator process that
// TestCoordinatorKilledMidMergeResumesWithinAMinute kills with SIGKILL.
func TestHelperHangingCoordinator(t *testing.T) {
	addr := os.Getenv(hangingEnv)
	if addr == "" {
		t.Skip("the killed coordinator of TestCoordinatorKilledMidMergeResumesWithinAMinute, run by it")
	}
	cl, err := Config{Address: addr, Spool: t.TempDir()}.Dial(context.Background(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(cl, "rig.test.coordinator", worker.Options{})
	RegisterCoordinator(w, hangingMerge{fakeCoordinator: &fakeCoordinator{trials: heartbeatTrials}, began: os.Getenv(hangingEnv + "_BEGAN")})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Hour)
}

// A coordinator daemon killed inside a merge: the merge's heartbeats stop,
// the engine times it out after coordinatorHeartbeatTimeout and hands it
// to the restarted coordinator, and the run ends within a minute of the
// kill. Before the coordinator's activities had a heartbeat timeout, the
// merge waited out its whole 10-minute StartToClose timeout (issue 36:
// the trial merged 10 min 1 s after the kill).
func TestCoordinatorKilledMidMergeResumesWithinAMinute(t *testing.T) {
	s := startDevServer(t)
	ctx := context.Background()
	cl, err := Config{Address: s.Address(), Spool: t.TempDir()}.Dial(ctx, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	f := &fakeTrials{}
	tw := worker.New(cl, "rig.test.hb", worker.Options{DisableWorkflowWorker: true})
	RegisterTrialActivity(tw, f.run)
	if err := tw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Stop)

	began := filepath.Join(t.TempDir(), "merge-began")
	first := exec.Command(os.Args[0], "-test.run=^TestHelperHangingCoordinator$", "-test.count=1")
	first.Env = append(os.Environ(), hangingEnv+"="+s.Address(), hangingEnv+"_BEGAN="+began)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Process.Kill(); first.Wait() })

	in := StudyInput{Study: "hb", Execution: "exec-1", Coordinator: "rig.test.coordinator", Chunk: 10, InFlight: 2, ChunksAtOnce: 1, StartWait: time.Minute}
	wr, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(in.Study, in.Execution), TaskQueue: in.Coordinator}, StudyWorkflowName, in)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(began); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first coordinator never began the merge")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	first.Wait()

	second := &fakeCoordinator{trials: heartbeatTrials}
	cw := worker.New(cl, in.Coordinator, worker.Options{})
	RegisterCoordinator(cw, second)
	if err := cw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cw.Stop)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var res StudyResult
	if err := wr.Get(wctx, &res); err != nil {
		t.Fatalf("the run did not end within 3 minutes of the kill: %v", err)
	}
	took := time.Since(killed)
	t.Logf("merged by the restarted coordinator %s after the kill; result %+v", took.Round(100*time.Millisecond), res)
	second.mu.Lock()
	merged := second.counted[heartbeatTrials[0].Key]
	second.mu.Unlock()
	if !merged || res.Counted != 1 {
		t.Errorf("the trial was not merged by the restarted coordinator: counted %v, result %+v", merged, res)
	}
	if took > time.Minute {
		t.Errorf("the run ended %s after the coordinator was killed mid-merge; want within a minute", took.Round(time.Second))
	}
}
