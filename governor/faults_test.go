package governor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	rep, err := RunFaults(context.Background(), &out, FaultOptions{
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
	if _, err := LastPass(state); !errors.Is(err, ErrStale) {
		t.Fatalf("LastPass after a partial run = %v, want ErrStale", err)
	}
	if !strings.Contains(out.String(), "NVML") || !strings.Contains(out.String(), "simulated gpu sensor") {
		t.Errorf("output does not say how NVML classes ran:\n%s", out.String())
	}
	_ = time.Second
}
