package faults

import (
	"bytes"
	"context"
	"errors"
	"os"
	"rig/internal/testenv"
	"testing"
	"time"

	"rig/governor"
	"rig/internal/provision"
)

// installedOrSkip returns the provisioned runtime, or skips with the reason
// when provisioning has not written installed.env.
func installedOrSkip(t *testing.T) *realRuntime {
	t.Helper()
	in, err := loadRuntime(provision.Path())
	if errors.Is(err, ErrNotInstalled) {
		testenv.NeedsSetup(t, "llama-server and SmolLM2 in installed.env (the real-runtime classes)", err)
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
	rep, err := Run(context.Background(), &out, Options{
		StateDir: t.TempDir(), WorkDir: t.TempDir(), Repetitions: 3,
		Classes: []string{"hung-runtime", "runtime-crash"},
	})
	t.Log("\n" + out.String())
	if !errors.Is(err, ErrSuiteFailed) { // partial run: never a pass
		t.Fatalf("err = %v", err)
	}
	want := map[string]string{"hung-runtime": governor.PolicyHungRuntime, "runtime-crash": governor.PolicyRuntimeCrash}
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
	d := 15 * time.Second
	if v := os.Getenv("RIG_GOVERNOR_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("RIG_GOVERNOR_SOAK: %v", err)
		}
	}
	var out bytes.Buffer
	res, err := Soak(context.Background(), &out, d, Options{StateDir: t.TempDir(), WorkDir: t.TempDir()})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Trials < 2 || res.Tokens < 64 {
		t.Fatalf("soak ran %d trials, %d tokens", res.Trials, res.Tokens)
	}
	if len(res.Stalls) > 0 {
		t.Errorf("runtime stalls: %v", res.Stalls)
	}
	if n := len(res.FalsePreemptions); n != 0 {
		t.Fatalf("%d false preemptions: %+v", n, res.FalsePreemptions)
	}
}

// TestFullSuite runs every class at the default repetitions, as the nightly
// job does; it takes a few minutes, so it runs only when asked.
func TestFullSuite(t *testing.T) {
	if os.Getenv("RIG_GOVERNOR_FULL_SUITE") == "" {
		t.Skip("set RIG_GOVERNOR_FULL_SUITE=1 to run the whole fault suite (a few minutes)")
	}
	installedOrSkip(t)
	state := os.Getenv("RIG_GOVERNOR_STATE_DIR")
	if state == "" {
		state = t.TempDir()
	}
	var out bytes.Buffer
	rep, err := Run(context.Background(), &out, Options{StateDir: state, WorkDir: t.TempDir()})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := governor.CheckFresh(state, 0, time.Now()); err != nil {
		t.Fatalf("after a pass: %v", err)
	}
	if len(rep.Classes) != len(ClassNames()) {
		t.Fatalf("%d classes", len(rep.Classes))
	}
}
