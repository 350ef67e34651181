package preflight

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

func reserveOrSkip(t *testing.T, limit Size) *Reservation {
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

func TestReservationOOMKillsOverrun(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found; it is the allocating process of this test")
	}
	r := reserveOrSkip(t, 128*MiB)
	if got := filepath.Base(r.Dir()); got != r.Name() || !staleName.MatchString(got) {
		t.Fatalf("reservation dir %q is not named rig-<pid>-<n>", r.Dir())
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
	if peak < 100*MiB || peak > 128*MiB {
		t.Errorf("peak %s; want near the 128MiB limit", peak)
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
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	r := reserveOrSkip(t, 512*MiB)
	out, err := r.Command(context.Background(), "python3", "-c", "b = bytearray(200 << 20); print('ok')").CombinedOutput()
	if err != nil {
		t.Fatalf("200MiB in 512MiB failed: %v %s", err, out)
	}
	peak, _ := r.Peak()
	if peak < 200*MiB || peak > 300*MiB {
		t.Errorf("peak %s; want just above the 200MiB allocated", peak)
	}
	if oom, _ := r.OOM(); oom.Kills != 0 {
		t.Errorf("OOM kills %d where it fits", oom.Kills)
	}
}

func TestCloseKillsRemainingProcesses(t *testing.T) {
	r := reserveOrSkip(t, 64*MiB)
	cmd := r.Command(context.Background(), "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForProcs(t, r.ProcsFile(), 1)
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
	live := reserveOrSkip(t, 64*MiB)
	parent := filepath.Dir(live.Dir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, fmt.Sprintf("rig-%d-1", dead.Process.Pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeGroup(stale) })
	// A leftover runtime still inside the dead rig's group must be killed too.
	orphan := exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec sleep 300`, filepath.Join(stale, "cgroup.procs"))
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = orphan.Wait() }()
	waitForProcs(t, filepath.Join(stale, "cgroup.procs"), 1)

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

func waitForProcs(t *testing.T, procs string, n int) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if p, _ := readPids(procs); len(p) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never held %d processes", procs, n)
}

func TestReserveRejectsBadLimit(t *testing.T) {
	for _, l := range []Size{0, 2 * TiB} {
		if _, err := Reserve(context.Background(), l); !errors.Is(err, ErrBadSize) {
			t.Errorf("Reserve(%d): %v, want ErrBadSize", l, err)
		}
	}
}
