package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"rig/governor"
	"rig/governor/gates"
	"rig/internal/offload"
	"rig/internal/provision"
	"rig/preflight"
	"rig/runtimes"
)

func newGovernorCardCommand() *cobra.Command {
	var modelFile, budget string
	var noSandbox bool
	cmd := &cobra.Command{
		Use:   "card-check --model FILE --budget 256MiB",
		Short: "On a real card: the governor reads NVML and preempts a runtime above its card-memory budget",
		Long: `card-check starts the governor on this machine's real sensors (NVML for the
card), starts llama-server's CUDA build with every layer of --model on the card,
and watches one long generation as a trial held to --budget of card memory. A
budget below what the runtime holds must be preempted by the governor's
card-memory policy; the command prints the NVML readings, the runtime's own
per-process card memory, the preemption's reason and how long it took, and
fails when the governor did not preempt. Without a card it says so and stops.

  rig runtimes synth-model --shape 1b --out /tmp/synth-1b.gguf
  rig governor card-check --model /tmp/synth-1b.gguf --budget 256MiB`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			limit, err := preflight.ParseSize(budget)
			if err != nil || limit == 0 {
				return fmt.Errorf("--budget %q: give card memory, e.g. 256MiB", budget)
			}
			if modelFile == "" {
				return errors.New("--model: give a GGUF (rig runtimes synth-model writes one)")
			}
			in, err := provision.Load()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			out := cmd.OutOrStdout()
			nv, err := governor.OpenNVML(ctx, 0)
			if err != nil {
				return fmt.Errorf("governor card-check: no card: %w", err)
			}
			nv.Close() // only to refuse early; the governor opens its own
			build, err := runtimes.BuildOf(in, offload.ComponentLlamaServerCUDA)
			if err != nil {
				return err
			}
			sum, err := runtimes.FileSHA256(modelFile)
			if err != nil {
				return err
			}
			home, err := os.MkdirTemp("", "rig-card-check-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(home)
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			g, err := gates.Start(ctx, gates.Options{Home: home, Sink: governor.SlogSink{Logger: log}, Log: log})
			if err != nil {
				return err
			}
			rt, err := build.Start(ctx, runtimes.Config{Model: modelFile, ModelName: filepath.Base(modelFile), ModelSHA256: sum,
				Context: 4096, WorkDir: filepath.Join(home, "rt"), NoSandbox: noSandbox,
				Offload: offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}})
			if err != nil {
				return err
			}
			defer rt.Stop(context.Background())
			if rep := rt.Pins().Load; rep != nil {
				fmt.Fprintf(out, "load report: %s\n", rep)
			}
			guard, err := g.Watch(ctx, "card-check", rt.Sandbox(), uint64(limit))
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
				return fmt.Errorf("governor card-check: the governor did not preempt a runtime held to %s of card memory within a minute (last generation: %v)", limit, genErr)
			}
			fmt.Fprintf(out, "preempted after %s: %s\n", time.Since(started).Round(time.Millisecond), why)
			return nil
		},
	}
	cmd.Flags().StringVar(&modelFile, "model", "", "the GGUF to load on the card")
	cmd.Flags().StringVar(&budget, "budget", "256MiB", "the trial's card-memory budget; below what the runtime holds, it must be preempted")
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run the runtime without its network namespace")
	return cmd
}
