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
	cmd.AddCommand(newBenchStatsCommand(), newBenchPreflightCommand())
	cmd.AddCommand(newBenchReplayCommand(), newBenchScaleCommand(), newBenchRuntimesCommand(), newBenchSlotsCommand())
	cmd.AddCommand(newBenchFidelityCommand())
	return cmd
}

func newBenchStatsCommand() *cobra.Command {
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
	return statsCmd
}

// benchPreflightOptions are rig bench preflight's flags.
type benchPreflightOptions struct {
	table, calOut string
	runtimes      []string
	fit           bool
	repeats       int
	device        string
	cardIndex     int
	cardModels    []string
	contexts      []int
	kvTypes       []string
	otherQuants   bool
	fromTables    []string
}

func newBenchPreflightCommand() *cobra.Command {
	var o *benchPreflightOptions
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
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o = benchPreflightFlags(pre)
	return pre
}

// benchPreflightFlags adds rig bench preflight's flags to cmd.
func benchPreflightFlags(cmd *cobra.Command) *benchPreflightOptions {
	o := &benchPreflightOptions{}
	f := cmd.Flags()
	f.StringVar(&o.device, "device", "cpu", "cpu (memory cgroups) or cuda (a real card through NVML)")
	f.IntVar(&o.cardIndex, "card", 0, "with --device cuda, the card's NVML index")
	f.StringSliceVar(&o.cardModels, "model", nil, "with --device cuda, GGUF files to measure instead of the provisioned models")
	f.StringVar(&o.table, "table", "", "also write the measured table (Markdown) here")
	f.StringSliceVar(&o.runtimes, "runtime", nil, "runtimes to measure: llama-server, ollama (default: each one installed)")
	f.BoolVar(&o.fit, "fit", false, "fit each measured runtime's overhead constants from this run and print them")
	f.StringVar(&o.calOut, "calibration-out", "", "with --fit, write the fitted calibration JSON here (e.g. preflight/calibration.json)")
	f.IntSliceVar(&o.contexts, "context", nil, "contexts to measure (default 2048,8192,32768)")
	f.StringSliceVar(&o.fromTables, "from", nil, "predict (and with --fit, fit) again from the measured peaks of tables an earlier run wrote with --table, without running the runtimes")
	f.BoolVar(&o.otherQuants, "other-quants", false, "also measure the other provisioned quants (the Q8_0 files setup requantizes)")
	f.StringSliceVar(&o.kvTypes, "kv", nil, "KV-cache types to measure (default f16,q8_0)")
	f.IntVar(&o.repeats, "repeats", 1, "measure each configuration this many times (the fit counts their spread into its error)")
	return o
}

// run measures on the CPU with memory cgroups, on a card through NVML, or
// predicts again from tables an earlier run wrote.
func (o *benchPreflightOptions) run(cmd *cobra.Command) error {
	// A bad flag is refused first, on a machine with no setup too.
	if o.device != "cpu" && o.device != "cuda" {
		return fmt.Errorf("--device %q: use cpu (memory cgroups on this host) or cuda (a real card, through NVML)", o.device)
	}
	in, err := provision.Load()
	if err != nil {
		return err
	}
	if o.device == "cuda" {
		var models []provision.Model
		for _, f := range o.cardModels {
			sum, err := runtimes.FileSHA256(f)
			if err != nil {
				return fmt.Errorf("--model: %w", err)
			}
			models = append(models, provision.Model{Name: strings.TrimSuffix(filepath.Base(f), ".gguf"), Path: f, SHA256: sum})
		}
		_, err := memory.RunCard(cmd.Context(), cmd.OutOrStdout(), memory.CardOptions{Installed: in, Card: o.cardIndex, Models: models})
		return err
	}
	if len(o.fromTables) > 0 {
		return memory.Refit(cmd.Context(), cmd.OutOrStdout(), memory.Options{Installed: in, Runtimes: o.runtimes, Models: benchModels(in, o.otherQuants),
			Machine: runtimes.ReadMachine().String(), TablePath: o.table, Fit: o.fit, CalibrationOut: o.calOut}, o.fromTables)
	}
	return memory.Run(cmd.Context(), cmd.OutOrStdout(), memory.Options{
		Installed: in, Runtimes: o.runtimes,
		Machine: runtimes.ReadMachine().String(), TablePath: o.table, Fit: o.fit, CalibrationOut: o.calOut, Repeats: o.repeats,
		Contexts: o.contexts, KVTypes: o.kvTypes, Models: benchModels(in, o.otherQuants),
	})
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
