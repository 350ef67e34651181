package gates_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/governor"
	"rig/run"
	"rig/run/gates"
	"rig/runtimes"
)

// simulatedCard starts gates on the simulated card sensor and a plain
// (uncontained) process for them to watch.
func simulatedCard(t *testing.T) (context.Context, *gates.Gates, *governor.Simulated, *runtimes.Sandbox) {
	t.Helper()
	t.Setenv("HOME", t.TempDir()) // the governor's state directory
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gpu := governor.SimulatedGPU()
	g, err := gates.Start(ctx, gates.Options{Home: t.TempDir(), Sink: governor.SlogSink{Logger: log}, Log: log, GPU: gpu})
	if err != nil {
		t.Fatal(err)
	}
	// A trial waits for the governor's first reading of its sensors, as the
	// runner does (waitForGates); on a busy machine that reading can come
	// after Start returns, and Watch would see a held queue.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok, why := g.MayStart()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the governor holds the queue 10 s after start: %s", why)
		}
	}
	dir := t.TempDir()
	env, err := runtimes.BuildEnv(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := runtimes.StartSandbox(ctx, runtimes.SandboxSpec{Argv: []string{"sleep", "60"}, Env: env, Dir: dir, NoSandbox: true}, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Kill)
	return ctx, g, gpu, sb
}

// The card's paths on the simulated card sensor (the same one fault
// injection uses): a trial's energy is the counter's difference over the
// trial, and card memory above the trial's budget preempts it.
func TestSimulatedCardEnergyAndBudget(t *testing.T) {
	ctx, g, gpu, sb := simulatedCard(t)
	// As a launcher marks a runtime that holds its model on the card.
	sb.OnCard = true

	start, _ := gpu.EnergyJoules()
	guard, err := g.Watch(ctx, "trial-1", sb, 4<<30)
	if err != nil {
		t.Fatal(err)
	}
	gpu.Set(governor.KeyEnergyJ, start+250)
	if why := guard.End(); why != "" {
		t.Fatalf("trial-1 preempted: %s", why)
	}
	em, ok := guard.(run.EnergyMeter)
	if !ok {
		t.Fatal("the guard measures no energy although the card has a counter")
	}
	if j, ok := em.TrialEnergy(); !ok || j != 250 {
		t.Errorf("trial energy %v (measured %v), want 250 J: the counter's difference over the trial", j, ok)
	}

	guard, err = g.Watch(ctx, "trial-2", sb, 4<<30)
	if err != nil {
		t.Fatal(err)
	}
	gpu.Set(governor.KeyCardMemBytes, 5<<30)
	select {
	case <-guard.Preempted():
	case <-time.After(15 * time.Second):
		t.Fatal("card memory 5 GiB against a 4 GiB budget did not preempt the trial")
	}
	if why := guard.End(); !strings.Contains(why, "card") {
		t.Errorf("preemption reason %q does not name the card's memory", why)
	}
}

// A CPU arm's trial on a machine with a card: no energy is claimed for it
// (the counter measures the card, which the trial did not use).
func TestNoCardEnergyForACPUTrial(t *testing.T) {
	ctx, g, gpu, sb := simulatedCard(t)
	start, _ := gpu.EnergyJoules()
	guard, err := g.Watch(ctx, "cpu-trial", sb, 0)
	if err != nil {
		t.Fatal(err)
	}
	gpu.Set(governor.KeyEnergyJ, start+90)
	guard.End()
	if j, ok := guard.(run.EnergyMeter).TrialEnergy(); ok {
		t.Errorf("a CPU trial was given the card's %v J", j)
	}
}
