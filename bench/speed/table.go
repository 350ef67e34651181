package speed

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the bench as a table (one line per model × threads ×
// runtime, then the ratios against the goals), the machine line and each
// build's pins with the CPU backend it loaded.
func (r Result) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "rig bench runtimes, %s: pp%d and tg%d, context %d, greedy, %d repetitions interleaved across runtimes\n",
		r.Date, r.PromptTokens, r.GenTokens, r.Context, r.Reps)
	fmt.Fprintf(w, "machine: %s\n\n", r.Machine)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\tthreads\truntime\tpp%d tok/s\ttg%d tok/s\tTTFT p50/p99 ms\tTPOT p50/p99 ms\tpeak MiB\ttimed/wall\n", r.PromptTokens, r.GenTokens)
	for _, c := range r.Cells {
		for _, row := range c.Rows {
			fmt.Fprintf(tw, "%s %s\t%d\t%s\t%.1f ± %.1f\t%.1f ± %.1f\t%.0f / %.0f\t%.2f / %.2f\t%.0f\t%.2f–%.2f\n",
				c.Model, c.Quant, c.Threads, row.Runtime, row.PP.Mean, row.PP.SD, row.TG.Mean, row.TG.SD,
				row.TTFT.P50, row.TTFT.P99, row.TPOT.P50, row.TPOT.P99, float64(row.PeakMemory)/(1<<20), row.Coverage[0], row.Coverage[1])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nratios to llama-server (goal: pp ≥ %.2f×, tg ≥ %.2f×)\n", PromptGoal, GenerationGoal)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "model\tthreads\truntime\tpp ratio\ttg ratio\tgoal")
	for _, c := range r.Cells {
		for _, q := range c.Ratios {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f×\t%.2f×\t%s\n", c.Model, c.Threads, q.Runtime, q.PP, q.TG, map[bool]string{true: "met", false: "MISSED"}[q.Pass])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Causes) > 0 {
		fmt.Fprintln(w, "\nwhere the generation gap comes from (probed at one thread fewer, the freed cores idle, then busy):")
		for _, c := range r.Causes {
			fmt.Fprintf(w, "  %s\n", c.Reading)
		}
	}
	fmt.Fprintln(w, "\nbuilds:")
	for _, b := range r.Builds {
		fmt.Fprintf(w, "  %s %s (binary sha256 %s)\n    build: %s\n", b.Runtime, b.Version, short(b.BinarySHA256), b.BuildFlags)
		if b.WeightRepack != "" {
			fmt.Fprintf(w, "    weight repack: %s\n", b.WeightRepack)
		}
		if b.CPU != nil {
			fmt.Fprintf(w, "    CPU backend: %s\n", b.CPU)
		} else {
			fmt.Fprintln(w, "    CPU backend: its log named none")
		}
	}
	var short []string
	for _, c := range r.Cells {
		for _, row := range c.Rows {
			for _, call := range row.Calls {
				if call.Kind == "tg" && call.OutputTokens < r.GenTokens*9/10 {
					short = append(short, fmt.Sprintf("%s %s t%d rep %d: %d tokens", c.Model, row.Runtime, c.Threads, call.Rep, call.OutputTokens))
				}
			}
		}
	}
	if len(short) > 0 {
		fmt.Fprintf(w, "\ntg calls that stopped before %d tokens (rates are over the tokens made): %s\n", r.GenTokens, strings.Join(short, "; "))
	}
	fmt.Fprintln(w, "\npp and tg are the runtime's own timings (llama-server's timings, Ollama's prompt_eval_duration and eval_duration);")
	fmt.Fprintln(w, "TTFT is the pp call's wall time (prompt read, first token out); TPOT the tg call's generation time per token;")
	fmt.Fprintln(w, "timed/wall is the share of each call's wall time those timings cover (never above 1, checked per call).")
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}
