package runtimes

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"testing"

	"rig/internal/cgroup"
)

// A call's peak is the peak of that call: a larger allocation by an earlier
// call in the same memory cgroup does not show in a later call's reading.
func TestPeakMeterMeasuresEachCallInItsCgroup(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found; it is the allocating process of this test")
	}
	res, err := cgroup.Reserve(context.Background(), 512<<20)
	if errors.Is(err, cgroup.ErrNoCgroup) {
		t.Skipf("no writable memory cgroup here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	m := peakMeter{cgroup: res.Dir()}
	if m.source() != "cgroup" {
		t.Fatalf("source %q with a cgroup", m.source())
	}
	alloc := func(mib int) int64 {
		t.Helper()
		w := m.start()
		if out, err := res.Command(context.Background(), "python3", "-c", "b = bytearray("+strconv.Itoa(mib)+" << 20)").CombinedOutput(); err != nil {
			t.Fatalf("%d MiB: %v %s", mib, err, out)
		}
		return w.read()
	}
	big := alloc(200)
	small := alloc(20)
	if big < 200<<20 {
		t.Errorf("the 200MiB call read a peak of %d MiB", big>>20)
	}
	probe, err := cgroup.OpenWindow(res.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if probe.SinceOpen() && (small < 20<<20 || small >= 150<<20) {
		t.Errorf("the 20MiB call after a 200MiB one read %d MiB: the window did not restart", small>>20)
	}
}
