package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"rig/governor"
	"rig/internal/offload"
	"rig/internal/provision"
	"rig/preflight"
	"rig/run/gates"
	"rig/runtimes"
)

// CardCheckOptions is one `rig governor card-check`.
type CardCheckOptions struct {
	Model     string // the GGUF loaded with every layer on the card
	Budget    uint64 // the trial's card memory, in bytes
	NoSandbox bool
}

// CardCheck starts the governor on this machine's real sensors (NVML for
// the card) and llama-server's CUDA build with every layer of the model on
// the card, and watches one long generation as a trial held to the budget:
// the governor must preempt it. It prints to out what it read and how long
// the preemption took; errw gets the governor's warnings. It runs here,
// not in a daemon: a check of this machine's card and governor.
func CardCheck(ctx context.Context, o CardCheckOptions, out, errw io.Writer) error {
	in, err := provision.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nv, err := governor.OpenNVML(ctx, 0)
	if err != nil {
		return fmt.Errorf("governor card-check: no card: %w", err)
	}
	nv.Close() // only to refuse early; the governor opens its own
	build, err := runtimes.BuildOf(in, offload.ComponentLlamaServerCUDA)
	if err != nil {
		return err
	}
	sum, err := runtimes.FileSHA256(o.Model)
	if err != nil {
		return err
	}
	home, err := os.MkdirTemp("", "rig-card-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	log := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g, err := gates.Start(ctx, gates.Options{Home: home, Sink: governor.SlogSink{Logger: log}, Log: log})
	if err != nil {
		return err
	}
	rt, err := build.Start(ctx, runtimes.Config{Model: o.Model, ModelName: filepath.Base(o.Model), ModelSHA256: sum,
		Context: 4096, WorkDir: filepath.Join(home, "rt"), NoSandbox: o.NoSandbox,
		Offload: offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}})
	if err != nil {
		return err
	}
	defer rt.Stop(context.Background())
	if rep := rt.Pins().Load; rep != nil {
		fmt.Fprintf(out, "load report: %s\n", rep)
	}
	guard, err := g.Watch(ctx, "card-check", rt.Sandbox(), o.Budget)
	if err != nil {
		return err
	}
	started := time.Now()
	gctx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	// Generations go on until the governor preempts or a minute
	// passes: a random-weight model may stop early, and the check
	// must not depend on how long it talks.
	var mu sync.Mutex
	var genErr error
	go func() {
		for gctx.Err() == nil {
			_, err := rt.Generate(gctx, runtimes.Request{CallID: "card-check", Messages: []runtimes.Message{{Role: "user", Content: "Write a long story."}},
				Sampling: runtimes.Sampling{Temperature: 0, Seed: 1}, MaxTokens: 2048})
			mu.Lock()
			genErr = err
			mu.Unlock()
			if err != nil && gctx.Err() == nil {
				stop()
			}
		}
	}()
	select {
	case <-guard.Preempted():
	case <-gctx.Done():
	}
	stop()
	why := guard.End()
	if why == "" {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("governor card-check: the governor did not preempt a runtime held to %s of card memory within a minute (last generation: %v)", preflight.Size(o.Budget), genErr)
	}
	fmt.Fprintf(out, "preempted after %s: %s\n", time.Since(started).Round(time.Millisecond), why)
	return nil
}
