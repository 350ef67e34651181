package faults

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rig/governor"
)

// simulatedClasses are the classes that need no installed runtime.
func simulatedClasses() []string {
	var out []string
	for _, c := range faultClasses() {
		if !c.runtime {
			out = append(out, c.name)
		}
	}
	return out
}

func TestRunFaultsSimulatedClasses(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite takes ~30s")
	}
	state := t.TempDir()
	var out bytes.Buffer
	rep, err := Run(context.Background(), &out, Options{
		StateDir: state, WorkDir: t.TempDir(), Repetitions: 2, Classes: simulatedClasses(),
		InstalledEnv: filepath.Join(t.TempDir(), "missing.env"),
	})
	t.Log("\n" + out.String())
	// A partial run is recorded but never passes.
	if !errors.Is(err, ErrSuiteFailed) {
		t.Fatalf("partial run: err = %v, want ErrSuiteFailed", err)
	}
	if len(rep.Classes) != len(simulatedClasses()) {
		t.Fatalf("got %d class results, want %d", len(rep.Classes), len(simulatedClasses()))
	}
	for _, c := range rep.Classes {
		if !c.Pass {
			t.Errorf("%s: %+v", c.Class, c)
		}
		if c.Reps != 2 || len(c.LatencyMS) != 2 {
			t.Errorf("%s: reps %d latencies %v", c.Class, c.Reps, c.LatencyMS)
		}
		if !c.Marked || !c.Rerun || !c.NothingLost {
			t.Errorf("%s: marked %v rerun %v nothing lost %v", c.Class, c.Marked, c.Rerun, c.NothingLost)
		}
	}
	if _, err := os.Stat(rep.Path); err != nil {
		t.Fatalf("record not stored: %v", err)
	}
	if _, err := governor.LastPass(state); !errors.Is(err, governor.ErrStale) {
		t.Fatalf("LastPass after a partial run = %v, want ErrStale", err)
	}
	if _, nerr := governor.OpenNVML(context.Background(), 0); nerr != nil {
		// No card here: the output and the record must say the NVML-backed
		// classes ran on simulated sensors, naming them.
		for _, want := range append([]string{"NVML", "no NVIDIA GPU/NVML on this machine", "NVML-backed classes", "run on simulated sensors"}, nvmlClasses()...) {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		if !strings.Contains(rep.NVML, "absent (NVML-backed classes ran on simulated sensors)") {
			t.Errorf("record NVML = %q, want it to say the classes ran on simulated sensors", rep.NVML)
		}
	} else if !strings.Contains(out.String(), "real readings are recorded") {
		t.Errorf("output does not say how NVML was used:\n%s", out.String())
	}
}

func TestNVMLClassesAreTheSimulatedGPUOnes(t *testing.T) {
	got := nvmlClasses()
	for _, want := range []string{"over-temperature", "over-power", "xid-event", "card-memory-over-budget"} {
		if !slices.Contains(got, want) {
			t.Errorf("nvmlClasses() = %v lacks %s", got, want)
		}
	}
	for _, c := range got {
		if slices.Contains([]string{"hung-runtime", "runtime-crash", "host-memory-pressure", "cgroup-oom-kill"}, c) {
			t.Errorf("nvmlClasses() names %s, which reads no card", c)
		}
	}
}
