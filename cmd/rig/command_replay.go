package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"rig/genrecord"
	"rig/replay"
)

func newReplayCommand() *cobra.Command {
	var req replay.ReplayRequest
	var rows, serverFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay GENERATIONS.jsonl",
		Short: "Re-score kept outputs through the pinned model and show they are genuine",
		Long: `replay reads a generation record, checks its pins against the stack this machine
would run (a different model file, binary or library is "stack differs", never
a pass or a fail of the text), starts the pinned runtime in its sandbox and
re-scores each selected row. On llama-server the kept tokens are forced with a
grammar of token-id literals, so one request re-scores a whole row; on Ollama,
whose API cannot force tokens, the row is regenerated in raw mode with its
recorded seed and sampling. Aider's calls replay the same way; ones kept in
older records as the chat request itself are rendered again (llama-server) or
sent again to Ollama's OpenAI-compatible endpoint, where they first went.
Every row's kept text must also be what its tokens spell (and, on
llama-server, what its ids detokenize to), and its rendered prompt must
tokenize to its kept prompt ids: a difference is a mismatch naming the field.

  rig replay generations-arm.jsonl                  every row
  rig replay generations-arm.jsonl --sample 20      a seeded random sample
  rig replay generations-arm.jsonl --rows r1,r2 --json
  rig replay executions/exec-1/generations-arm.jsonl --store store.bolt
                                  first check the record's sha256 against what
                                  the execution's receipts recorded
  rig replay generations-arm.jsonl --calibration calibration.json
                                  the tolerance measured by rig replay calibrate
                                  (default: exact, the goal on an unchanged stack)
  rig replay generations-arm.jsonl --mode prefill --calibration prefill.json
                                  score prompt + kept tokens in one batched pass
                                  through the pinned libllama (rig-prefill-score,
                                  built by make setup): a fraction of the cost,
                                  checked against a tolerance, since a batched
                                  pass is not bit-identical to decoding

--mode exact (the default) re-scores by decode steps as above; it is what a
disputed row falls back to. --mode prefill runs on llama-server records
only: the scorer must map the very library files the pinned server loads, or
the replay is "stack differs". Ollama's rows replay by regeneration (its API
cannot score given tokens and its llama.cpp is linked into its binary). A
calibration is used only in the mode and for the models it was measured on;
without one, prefill uses rig's default tolerance and says so.

An openai-server record replays on the server its arm describes (--server
design.json): started in its sandbox, its executable and Python environment
checked against the record's digests (a change is stale_asset, nothing is
replayed). A row is scored by the server's own prompt log-probabilities where
it gives them (echo with logprobs on /v1/completions, for a plain-text
prompt), else regenerated with its recorded sampling and seed; each row's
method is in the summary.

Exit status 1 unless every replayed row reproduced.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd, &req, args[0], rows, serverFile, asJSON)
		},
	}
	cmd.Flags().IntVar(&req.Options.Sample, "sample", 0, "replay a seeded random sample of this many rows")
	cmd.Flags().Uint64Var(&req.Options.Seed, "seed", 1, "seed of the sample")
	cmd.Flags().StringVar(&rows, "rows", "", "replay exactly these row ids (comma-separated)")
	cmd.Flags().StringVar(&req.Runtime, "runtime", "", "llama-server or ollama (default: the runtime that made the record)")
	cmd.Flags().Float64Var(&req.Options.Tolerance.Token, "tolerance-token", 0, "largest |Δ log-prob| allowed at a step, in nats (0: exact, the goal on an unchanged stack)")
	cmd.Flags().Float64Var(&req.Options.Tolerance.Row, "tolerance-row", 0, "largest mean |Δ| allowed over a row, in nats")
	cmd.Flags().StringVar(&req.Calibration, "calibration", "", "take the tolerance from this file, written by rig replay calibrate (the entry of the replaying runtime)")
	cmd.Flags().StringVar(&req.Options.WantSum, "sha256", "", "the record's sha256 from the receipt; a record that differs is refused")
	cmd.Flags().StringVar(&req.Store, "store", "", "the study's store.bolt: check the record's sha256 against its trials' receipts first (a record that differs is refused, naming both digests)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().BoolVar(&req.NoSandbox, "no-sandbox", false, "run without network namespaces")
	cmd.Flags().StringVar(&serverFile, "server", "", "an openai-server record's server: the study's design (the record's arm's server block) or a file holding the block")
	cmd.Flags().StringVar(&req.Mode, "mode", replay.ModeExact, "exact (decode steps through the runtime) or prefill (one batched pass through its library)")
	cmd.AddCommand(newReplayCalibrateCommand())
	return cmd
}

// runReplay replays the rows of the generation record file that req and
// rows select, prints the summary, and fails unless every row reproduced.
func runReplay(cmd *cobra.Command, req *replay.ReplayRequest, file, rows, serverFile string, asJSON bool) error {
	req.File = file
	if serverFile != "" {
		arm, err := replay.RecordArm(file)
		if err != nil {
			return err
		}
		spec, err := replay.LoadServerSpec(serverFile, arm)
		if err != nil {
			return err
		}
		req.Server = &spec
	}
	if rows != "" {
		req.Options.Rows = strings.Split(rows, ",")
	}
	sum, err := replay.ReplayRecord(cmd.Context(), *req)
	if err != nil {
		return err
	}
	if asJSON {
		b, err := sum.JSON()
		if err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), string(b))
	} else if err := sum.WriteText(cmd.OutOrStdout()); err != nil {
		return err
	}
	if sum.Status != genrecord.StatusReproduced {
		return fmt.Errorf("replay: %s", sum.Status)
	}
	return nil
}
