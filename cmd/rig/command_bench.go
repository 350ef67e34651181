package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"rig/bench/memory"
	"rig/bench/stats"
	"rig/internal/provision"
	"rig/runtimes"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure rig against its own goals, with ratios measured side by side",
	}
	var seed uint64
	var stopping bool
	statsCmd := &cobra.Command{
		Use:   "stats",
		Short: "Simulate the analysis: false winners under the null, interval coverage, power",
		Long: `stats runs the statistics against simulated truth: under the null with 8
identical arms, how often any winner is declared (goal: at most 5%); bootstrap
interval coverage against nominal (goal: within 1.5 points); the pass-rate
intervals' coverage over rates from 2% to 98%, 20 to 200 tasks, 1 and 3
repeats, arm rates and paired differences, printed cell by cell (goal: mean
within 1.5 points, no cell under 93.5% beyond Monte Carlo error); the power
calculation's predicted detection rate against the simulated one (goal: within
3 points). Exit status 1 when a goal is missed.

With --stopping it simulates early stopping instead (docs/statistics.md,
"Early stopping"): false winners under no difference with a look after every
block, trials saved and power at ±20 points, futility, for the
group-sequential and anytime rules beside the fixed design.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stopping {
				pass, err := stats.BenchStopping(cmd.Context(), cmd.OutOrStdout(), 0, seed)
				if err == nil && !pass {
					err = fmt.Errorf("bench stats --stopping: a goal was missed")
				}
				return err
			}
			res, err := stats.BenchStats(cmd.Context(), cmd.OutOrStdout(), stats.BenchOptions{Seed: seed})
			if err != nil {
				return err
			}
			if !res.Pass {
				return fmt.Errorf("bench stats: a goal was missed")
			}
			return nil
		},
	}
	statsCmd.Flags().Uint64Var(&seed, "seed", 1, "simulation seed")
	statsCmd.Flags().BoolVar(&stopping, "stopping", false, "simulate the early-stopping rules instead (4000 studies per setting)")
	var table, calOut string
	var benchRuntimes []string
	var fit bool
	var repeats int
	var device string
	var cardIndex int
	var cardModels []string
	var contexts []int
	var kvTypes []string
	var otherQuants bool
	var fromTables []string
	pre := &cobra.Command{
		Use:   "preflight",
		Short: "Measure true peaks of the real models and compare rig's, the runtimes' own and gguf-parser-go's predictions",
		Long: `preflight runs each provisioned model at three context sizes and two KV-cache
types on llama-server and Ollama, each run held in a memory cgroup, measures
the true peak and prints predicted, measured and the error for rig, the
runtime's own estimate (llama.cpp's fit projection; Ollama's loaded size) and
gguf-parser-go, side by side. Goal: rig within 10% everywhere.

With --fit it fits each runtime's overhead constants from the run. The error
the fit claims (relative_error) is the worst fit error plus the widest spread
between repeats of one configuration, so measure with --repeats 2 or more
before committing a calibration: a peak moves by a few percent between runs.

  rig bench preflight --runtime ollama --fit --repeats 3 --calibration-out /tmp/cal.json --table /tmp/ollama.md

With --device cuda it measures on a real NVIDIA card instead: the CUDA
llama-server with every layer offloaded, each model at three contexts and two
KV types, the runtime's per-process card memory read through NVML beside the
CUDA buffers it logged and rig's prediction. The committed calibration has no
CUDA entry yet, so rig's column is the CPU constants' arithmetic, marked
uncalibrated; a run study's preflight refuses the CUDA backend as uncalibrated
until one is committed (docs/gpu.md). Without a card it says so and stops.

  rig bench preflight --device cuda --card 0`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := provision.Load()
			if err != nil {
				return err
			}
			switch device {
			case "cpu":
			case "cuda":
				var models []provision.Model
				for _, f := range cardModels {
					sum, err := runtimes.FileSHA256(f)
					if err != nil {
						return fmt.Errorf("--model: %w", err)
					}
					models = append(models, provision.Model{Name: strings.TrimSuffix(filepath.Base(f), ".gguf"), Path: f, SHA256: sum})
				}
				_, err := memory.RunCard(cmd.Context(), cmd.OutOrStdout(), memory.CardOptions{Installed: in, Card: cardIndex, Models: models})
				return err
			default:
				return fmt.Errorf("--device %q: use cpu (memory cgroups on this host) or cuda (a real card, through NVML)", device)
			}
			if len(fromTables) > 0 {
				return memory.Refit(cmd.Context(), cmd.OutOrStdout(), memory.Options{Installed: in, Runtimes: benchRuntimes, Models: benchModels(in, otherQuants),
					Machine: runtimes.ReadMachine().String(), TablePath: table, Fit: fit, CalibrationOut: calOut}, fromTables)
			}
			return memory.Run(cmd.Context(), cmd.OutOrStdout(), memory.Options{
				Installed: in, Runtimes: benchRuntimes,
				Machine: runtimes.ReadMachine().String(), TablePath: table, Fit: fit, CalibrationOut: calOut, Repeats: repeats,
				Contexts: contexts, KVTypes: kvTypes, Models: benchModels(in, otherQuants),
			})
		},
	}
	pre.Flags().StringVar(&device, "device", "cpu", "cpu (memory cgroups) or cuda (a real card through NVML)")
	pre.Flags().IntVar(&cardIndex, "card", 0, "with --device cuda, the card's NVML index")
	pre.Flags().StringSliceVar(&cardModels, "model", nil, "with --device cuda, GGUF files to measure instead of the provisioned models")
	pre.Flags().StringVar(&table, "table", "", "also write the measured table (Markdown) here")
	pre.Flags().StringSliceVar(&benchRuntimes, "runtime", nil, "runtimes to measure: llama-server, ollama (default: each one installed)")
	pre.Flags().BoolVar(&fit, "fit", false, "fit each measured runtime's overhead constants from this run and print them")
	pre.Flags().StringVar(&calOut, "calibration-out", "", "with --fit, write the fitted calibration JSON here (e.g. preflight/calibration.json)")
	pre.Flags().IntSliceVar(&contexts, "context", nil, "contexts to measure (default 2048,8192,32768)")
	pre.Flags().StringSliceVar(&fromTables, "from", nil, "predict (and with --fit, fit) again from the measured peaks of tables an earlier run wrote with --table, without running the runtimes")
	pre.Flags().BoolVar(&otherQuants, "other-quants", false, "also measure the other provisioned quants (the Q8_0 files setup requantizes)")
	pre.Flags().StringSliceVar(&kvTypes, "kv", nil, "KV-cache types to measure (default f16,q8_0)")
	pre.Flags().IntVar(&repeats, "repeats", 1, "measure each configuration this many times (the fit counts their spread into its error)")
	cmd.AddCommand(statsCmd, pre)
	cmd.AddCommand(newBenchReplayCommand(), newBenchScaleCommand(), newBenchRuntimesCommand())
	return cmd
}

// benchModels is what `rig bench preflight` measures: nil (every provisioned
// model) unless the other quants are asked for too, each then named with its
// quant so that its rows and Ollama's import stay apart.
func benchModels(in provision.Installed, otherQuants bool) []provision.Model {
	if !otherQuants {
		return nil
	}
	var out []provision.Model
	for _, set := range []map[string]provision.Model{in.Models, in.OtherQuants} {
		for _, name := range slices.Sorted(maps.Keys(set)) {
			if m := set[name]; m.Path != "" {
				m.Name += "-" + strings.ToLower(m.Quant)
				out = append(out, m)
			}
		}
	}
	return out
}
