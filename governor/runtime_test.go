package governor

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// installedOrSkip returns the installed runtime, or skips with the reason
// when provisioning has not written installed.env.
func installedOrSkip(t *testing.T) Installed {
	t.Helper()
	in, err := ReadInstalled(DefaultInstalledEnv())
	if errors.Is(err, ErrNotInstalled) {
		t.Skipf("real-runtime classes need llama-server and SmolLM2 from installed.env: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestRuntimeFaultClasses(t *testing.T) {
	installedOrSkip(t)
	if testing.Short() {
		t.Skip("starts llama-server a dozen times")
	}
	var out bytes.Buffer
	rep, err := RunFaults(context.Background(), &out, FaultOptions{
		StateDir: t.TempDir(), WorkDir: t.TempDir(), Repetitions: 3,
		Classes: []string{"hung-runtime", "runtime-crash"},
	})
	t.Log("\n" + out.String())
	if !errors.Is(err, ErrSuiteFailed) { // partial run: never a pass
		t.Fatalf("err = %v", err)
	}
	want := map[string]string{"hung-runtime": PolicyHungRuntime, "runtime-crash": PolicyRuntimeCrash}
	for _, c := range rep.Classes {
		if !c.Pass || len(c.Observed) != 1 || c.Observed[0] != want[c.Class] {
			t.Errorf("%s: %+v", c.Class, c)
		}
		if !c.Marked || !c.Rerun || !c.NothingLost {
			t.Errorf("%s: marked %v rerun %v nothing lost %v", c.Class, c.Marked, c.Rerun, c.NothingLost)
		}
	}
	if len(rep.Classes) != 2 {
		t.Fatalf("%d classes ran", len(rep.Classes))
	}
}

func TestSoakShort(t *testing.T) {
	installedOrSkip(t)
	if testing.Short() {
		t.Skip("soak")
	}
	var out bytes.Buffer
	res, err := Soak(context.Background(), &out, 15*time.Second, FaultOptions{StateDir: t.TempDir(), WorkDir: t.TempDir()})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Trials < 2 || res.Tokens < 64 {
		t.Fatalf("soak ran %d trials, %d tokens", res.Trials, res.Tokens)
	}
	if n := len(res.FalsePreemptions); n != 0 {
		t.Fatalf("%d false preemptions: %+v", n, res.FalsePreemptions)
	}
}
