package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"rig/internal/provision"
	"rig/preflight"
	"rig/runtimes"
	"rig/studies/analysis"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure rig against its own goals, with ratios measured side by side",
	}
	var seed uint64
	stats := &cobra.Command{
		Use:   "stats",
		Short: "Simulate the analysis: false winners under the null, interval coverage, power",
		Long: `stats runs the statistics against simulated truth: under the null with 8
identical arms, how often any winner is declared (goal: at most 5%); bootstrap
interval coverage against nominal (goal: within 1.5 points); the power
calculation's predicted detection rate against the simulated one (goal: within
3 points). Exit status 1 when a goal is missed.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := analysis.BenchStats(cmd.Context(), cmd.OutOrStdout(), analysis.BenchOptions{Seed: seed})
			if err != nil {
				return err
			}
			if !res.Pass {
				return fmt.Errorf("bench stats: a goal was missed")
			}
			return nil
		},
	}
	stats.Flags().Uint64Var(&seed, "seed", 1, "simulation seed")
	var table string
	pre := &cobra.Command{
		Use:   "preflight",
		Short: "Measure true peaks of the real models and compare rig's, llama.cpp's and gguf-parser-go's predictions",
		Long: `preflight runs each provisioned model at three context sizes and two KV-cache
types on llama-server, each run held in a memory cgroup, measures the true peak
and prints predicted, measured and the error for rig, llama.cpp's own fit
estimate and gguf-parser-go, side by side. Goal: rig within 10% everywhere.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := provision.Load()
			if err != nil {
				return err
			}
			models := map[string]string{}
			for name, m := range in.Models {
				models[name] = m.Path
			}
			return preflight.BenchPreflight(cmd.Context(), cmd.OutOrStdout(), preflight.BenchOptions{
				LlamaServerBin: in.LlamaServer, Models: models, Machine: runtimes.ReadMachine().String(), TablePath: table,
			})
		},
	}
	pre.Flags().StringVar(&table, "table", "", "also write the measured table (Markdown) here")
	cmd.AddCommand(stats, pre)
	return cmd
}
