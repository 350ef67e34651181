package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const mib = 1 << 20

func reserveOrSkip(t *testing.T, limit uint64) *Reservation {
	t.Helper()
	r, err := Reserve(context.Background(), limit)
	if errors.Is(err, ErrNoCgroup) {
		t.Skipf("no writable memory cgroup here (needs root and cgroup v1 or v2 with the memory controller): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found; it is the allocating process of this test")
	}
}

func TestReservationOOMKillsOverrun(t *testing.T) {
	needPython(t)
	r := reserveOrSkip(t, 128*mib)
	if got := filepath.Base(r.Dir()); got != r.Name() || !groupName.MatchString(got) {
		t.Fatalf("reservation dir %q is not named rig-<pid>-<n>", r.Dir())
	}
	if max, err := MemoryMax(r.Dir()); err != nil || max != 128*mib {
		t.Errorf("MemoryMax of a 128MiB reservation = %d, %v", max, err)
	}
	cmd := r.Command(context.Background(), "python3", "-c", "b = bytearray(300 << 20); print('survived')")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("a 300MiB allocation in a 128MiB reservation ended with %v, output %q; want killed", err, out)
	}
	oom, err := r.OOM()
	if err != nil {
		t.Fatal(err)
	}
	if oom.Kills == 0 {
		t.Errorf("OOM record %+v shows no kill", oom)
	}
	peak, err := r.Peak()
	if err != nil {
		t.Fatal(err)
	}
	if peak < 100*mib || peak > 128*mib {
		t.Errorf("peak %d MiB; want near the 128MiB limit", peak/mib)
	}
	dir := r.Dir()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Close: %v", dir, err)
	}
}

func TestReservationFitsAndMeasures(t *testing.T) {
	needPython(t)
	r := reserveOrSkip(t, 512*mib)
	out, err := r.Command(context.Background(), "python3", "-c", "b = bytearray(200 << 20); print('ok')").CombinedOutput()
	if err != nil {
		t.Fatalf("200MiB in 512MiB failed: %v %s", err, out)
	}
	peak, _ := r.Peak()
	if peak < 200*mib || peak > 300*mib {
		t.Errorf("peak %d MiB; want just above the 200MiB allocated", peak/mib)
	}
	if oom, _ := r.OOM(); oom.Kills != 0 {
		t.Errorf("OOM kills %d where it fits", oom.Kills)
	}
}

// A peak read after ResetPeak is the peak of what ran since, not of an
// earlier, larger run in the same group.
func TestResetPeakStartsANewWindow(t *testing.T) {
	needPython(t)
	r := reserveOrSkip(t, 512*mib)
	if out, err := r.Command(context.Background(), "python3", "-c", "b = bytearray(200 << 20)").CombinedOutput(); err != nil {
		t.Fatalf("200MiB: %v %s", err, out)
	}
	if err := r.ResetPeak(); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Command(context.Background(), "python3", "-c", "b = bytearray(20 << 20)").CombinedOutput(); err != nil {
		t.Fatalf("20MiB: %v %s", err, out)
	}
	peak, err := r.Peak()
	if err != nil {
		t.Fatal(err)
	}
	if r.window.SinceOpen() && (peak < 20*mib || peak >= 150*mib) {
		t.Errorf("peak after reset %d MiB; want the 20MiB run's, not the 200MiB run's", peak/mib)
	}
	if !r.window.SinceOpen() && peak < 200*mib {
		t.Errorf("this kernel cannot reset the v2 peak, yet it reads %d MiB, below the 200MiB run", peak/mib)
	}
}

func TestCloseKillsRemainingProcesses(t *testing.T) {
	r := reserveOrSkip(t, 64*mib)
	cmd := r.Command(context.Background(), "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForProcs(t, r.Dir(), 1)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("sleep survived Close")
	}
}

func TestCleanupStaleRemovesDeadOwnersGroups(t *testing.T) {
	live := reserveOrSkip(t, 64*mib)
	parent := filepath.Dir(live.Dir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, fmt.Sprintf("rig-%d-1", dead.Process.Pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove(stale) })
	// A leftover runtime still inside the dead rig's group must be killed too.
	orphan := exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec sleep 300`, filepath.Join(stale, "cgroup.procs"))
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = orphan.Wait() }()
	waitForProcs(t, stale, 1)

	removed, err := CleanupStale(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale %s survives; removed %v", stale, removed)
	}
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Errorf("live reservation %s of this process was removed: %v", live.Dir(), err)
	}
}

func waitForProcs(t *testing.T, dir string, n int) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if p, _ := Procs(dir); len(p) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never held %d processes", dir, n)
}

func TestReserveRejectsBadLimit(t *testing.T) {
	for _, l := range []uint64{0, 2 << 40} {
		if _, err := Reserve(context.Background(), l); !errors.Is(err, ErrBadLimit) {
			t.Errorf("Reserve(%d): %v, want ErrBadLimit", l, err)
		}
	}
}

func TestPidsGroupStopsAForkBomb(t *testing.T) {
	g, err := NewPidsGroup(8, "")
	if errors.Is(err, ErrNoCgroup) {
		t.Skipf("no writable pids cgroup here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if max, err := g.Max(); err != nil || max != 8 {
		t.Errorf("pids.max = %d, %v; want 8", max, err)
	}
	// Twenty sleeps in a group capped at eight tasks: the kernel refuses
	// the forks past the cap, and the shell says so.
	script := `echo $$ > "$0"; for i in $(seq 20); do sleep 30 & done; wait`
	cmd := exec.Command("/bin/sh", "-c", script, filepath.Join(g.Dir(), "cgroup.procs"))
	_ = cmd.Start()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	var refused uint64
	for time.Now().Before(deadline) {
		if refused, err = g.Refused(); err != nil {
			t.Fatal(err)
		}
		if refused > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if refused == 0 {
		t.Errorf("no fork refused at a cap of 8 with 20 sleeps")
	}
	if pids, _ := Procs(g.Dir()); len(pids) > 8 {
		t.Errorf("%d processes in a group capped at 8", len(pids))
	}
	dir := g.Dir()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Close: %v", dir, err)
	}
}

func TestSelfMemoryDirAndCPUsOnThisHost(t *testing.T) {
	dir, err := SelfMemoryDir()
	if errors.Is(err, ErrNoCgroup) {
		t.Skipf("no readable memory cgroup here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadMemory(dir)
	if err != nil || m.Current == 0 {
		t.Errorf("%s: %+v %v; this process's own group charges at least this process", dir, m, err)
	}
	cpus, err := CPUs()
	if err != nil || len(cpus) == 0 {
		t.Errorf("CPUs: %v %v", cpus, err)
	}
}
