package speed

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints the slots bench: per runtime and slot count, rig's
// tokens/s over the batch, llama-batched-bench's S_TG and S at the same
// sequence count, rig's ratio to S and each one's speed-up over one slot.
func (r SlotsResult) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "rig bench slots, %s: %s %s, %d threads, context %d per slot, prompt %d, generation %d (the stop cap), top-5 log-probs, %d repetitions interleaved with llama-batched-bench\n",
		r.Date, r.Model, r.Quant, r.Threads, r.Context, r.PromptTokens, r.GenTokens, r.Reps)
	fmt.Fprintf(w, "machine: %s\n", r.Machine)
	fmt.Fprintf(w, "reference: %s\n\n", r.BenchArgs)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "runtime\tslots\trig gen tok/s\trig all tok/s\tbench S_TG\tbench S\trig/bench\trig speed-up\tbench speed-up\tshort\tgoal")
	for _, row := range r.Rows {
		short := 0
		for _, b := range row.Batches {
			short += b.Short
		}
		if len(row.Bench) == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%.1f ± %.1f\t%.1f ± %.1f\t–\t–\t–\t%.2f×\t–\t%d\tno reference (scaling only)\n",
				row.Runtime, row.Slots, row.Gen.Mean, row.Gen.SD, row.All.Mean, row.All.SD, row.SpeedUp, short)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f ± %.1f\t%.1f ± %.1f\t%.1f ± %.1f\t%.1f ± %.1f\t%.2f×\t%.2f×\t%.2f×\t%d\t%s\n",
			row.Runtime, row.Slots, row.Gen.Mean, row.Gen.SD, row.All.Mean, row.All.SD, row.STG.Mean, row.STG.SD, row.S.Mean, row.S.SD,
			row.Ratio, row.SpeedUp, row.BenchSpeedUp, short, map[bool]string{true: "met", false: "MISSED"}[row.Pass])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nrig gen/all: generated (and prompt + generated) tokens of the batch over its wall time, first send to last answer.\n")
	fmt.Fprintf(w, "rig/bench: rig all tok/s over the bench's S (both count prompt and generated tokens over the whole batch); goal ≥ %.2f×.\n", SlotsGoal)
	fmt.Fprintf(w, "speed-up: rig's gen tok/s, and the bench's S_TG, over their own at one slot. short: requests that stopped before the stop cap.\n")
	fmt.Fprintln(w, "\nbuilds:")
	for _, b := range r.Builds {
		fmt.Fprintf(w, "  %s %s (binary sha256 %s)\n", b.Runtime, b.Version, short(b.BinarySHA256))
	}
	return nil
}
