package faults

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/governor"
)

// TestHelperDaemon is not a test: TestDaemonKilledDuringPreemption runs the
// test binary again with RIG_GOV_HELPER_DIR set, and this plays the daemon.
func TestHelperDaemon(t *testing.T) {
	dir := os.Getenv("RIG_GOV_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process for TestDaemonKilledDuringPreemption")
	}
	l, err := openLedger(filepath.Join(dir, "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	gpu := governor.SimulatedGPU()
	cfg := governor.SuiteConfig()
	cfg.Grace = time.Minute // the runtime ignores SIGTERM: the stop takes long
	g, err := governor.New(governor.Options{Config: cfg, Sensors: []governor.Sensor{gpu, governor.SimulatedHost(), governor.NewSimulated("cgroup", nil), governor.NewProgress()}, Sink: &eventLog{}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Run(context.Background()) }()
	for ok := false; !ok; ok, _ = g.MayStart() {
		time.Sleep(10 * time.Millisecond)
	}
	a, err := l.start("trial-A")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w, err := g.Begin(governor.ProcessTarget{TrialID: a.TrialID, Pid: cmd.Process.Pid}, governor.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	gpu.Set(governor.KeyTempC, 95)
	<-w.Preempted()
	// Mid-preemption: the stop has begun, nothing is marked yet.
	if err := os.WriteFile(filepath.Join(dir, "preempting"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Minute)
}

func TestDaemonKilledDuringPreemption(t *testing.T) {
	if os.Getenv("RIG_GOV_HELPER_DIR") != "" {
		t.Skip("inside the helper")
	}
	dir := t.TempDir()
	daemon := exec.Command(os.Args[0], "-test.run=^TestHelperDaemon$", "-test.timeout=2m")
	daemon.Env = append(os.Environ(), "RIG_GOV_HELPER_DIR="+dir)
	daemon.Stdout, daemon.Stderr = io.Discard, io.Discard
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "preempting")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = daemon.Process.Kill()
			t.Fatal("helper daemon never reached the preemption")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = daemon.Process.Kill()
	_ = daemon.Wait()
	b, _ := os.ReadFile(marker)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
		// The dead daemon's runtime outlives it; a restarted daemon would
		// find and stop it through its cgroup. Here the test cleans up.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}

	// Restart: reopen the ledger, recover, rerun what is pending.
	l, err := openLedger(filepath.Join(dir, "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := l.recover()
	if err != nil {
		t.Fatal(err)
	}
	if len(fixed) != 1 || fixed[0].TrialID != "trial-A" {
		t.Fatalf("recovered %+v, want trial-A", fixed)
	}
	pend, err := l.pending([]string{"trial-A"})
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending %v %v: the trial would be lost", pend, err)
	}
	a, err := l.start("trial-A")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.finish(a); err != nil {
		t.Fatal(err)
	}
	// A second restart changes nothing: no double marking, no double score.
	if again, _ := l.recover(); len(again) != 0 {
		t.Fatalf("second recover fixed %v", again)
	}
	all, err := l.load()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("%d attempts, want 2: %+v", len(all), all)
	}
	if all[0].State != "preempted" || all[0].Scored || all[0].Cause == nil {
		t.Errorf("first attempt %+v, want preempted and not scored", all[0])
	}
	if all[1].State != "done" || !all[1].Scored || all[1].Parent != all[0].N {
		t.Errorf("rerun %+v, want done, scored, parent %d", all[1], all[0].N)
	}
	if pend, _ := l.pending([]string{"trial-A"}); len(pend) != 0 {
		t.Errorf("still pending after the rerun: %v", pend)
	}
}

func TestDiskFullLeavesNoPartialRecord(t *testing.T) {
	l, err := openLedger(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.start("t1")
	if err != nil {
		t.Fatal(err)
	}
	for _, room := range []int{0, 1, 24, 60} {
		l.setWrap(func(w io.Writer) io.Writer { return &FullDisk{W: w, Room: room} })
		if err := l.finish(a); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("room %d: err %v, want ENOSPC", room, err)
		}
		all, err := l.load()
		if err != nil {
			t.Fatalf("room %d: a record no longer parses: %v", room, err)
		}
		if len(all) != 1 || all[0].State != "running" || all[0].Scored {
			t.Fatalf("room %d: record changed by a failed write: %+v", room, all)
		}
		if left, _ := l.leftovers(); len(left) != 0 {
			t.Fatalf("room %d: partial files %v", room, left)
		}
	}
	l.setWrap(nil)
	if err := l.finish(a); err != nil {
		t.Fatal(err)
	}
	if all, _ := l.load(); !all[0].Scored {
		t.Fatal("write after the disk freed did not land")
	}
}
