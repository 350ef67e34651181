package main

import (
	"encoding/json"
	"fmt"
	"rig/replay"
	"rig/runtimes"

	"github.com/spf13/cobra"
)

func newReplayCalibrateCommand() *cobra.Command {
	var req replay.ReplayCalibrationRequest
	var runtime, out, serverFile, serverArm string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "calibrate --out CALIBRATION.json",
		Short: "Measure replay's noise floor and positive controls, and set the tolerance between them",
		Long: `calibrate generates short rows (even rows greedy, odd rows sampled at
temperature 0.8 with their own seed) on the pinned model and on a control
model, writes them as generation records and replays them:

  noise floor        the same record re-scored twice on the same stack, and the
                     control model's rows on their own stack
  positive controls  for each model's rows alike: one-token edits of the kept
                     text (a runner-up from the recorded top-K swapped in,
                     log-probs left as recorded), and the same with the
                     runner-up's log-prob copied in; text-only edits (one
                     character of the kept text, a digit where there is one,
                     tokens untouched) and prompt-only edits (one letter of
                     the rendered prompt, prompt ids untouched), which the
                     field checks catch; the rows re-scored by the other
                     model on a stack that claims the recorded pins (forced
                     token ids where the vocabulary allows, otherwise
                     regenerated and compared by text); and re-scored by
                     another quant of the same model claiming the pins
                     (set-up makes a Q8_0 of each bundled model with the
                     pinned llama-quantize, as no registry package carries a
                     second quant; where none was made the report says not
                     measured)

It then sets the per-token and per-row tolerance between the two with
genrecord.Calibrate, per runtime, prints the false-accept and false-reject
rates it observed on these rows and writes everything to --out.

  rig replay calibrate --out calibration.json
  rig replay calibrate --runtime llama-server --rows 40 --out cal.json --json
  rig replay calibrate --model gemma-3-270m --control smollm2-135m-instruct --out cal.json
  rig replay calibrate --runtime llama-server --slots 1,4 --out cal.json

An openai-server is calibrated on the server an arm describes, each model
started by the same command: rig replay calibrate --runtime openai-server
--server design.json [--server-arm ARM]. Its tolerance is that server's
(matched to a record by the executable's and the Python environment's
digests); where the server speaks /v1/completions half its rows go as plain
text, the rows its prompt log-probabilities can score.

A study whose arms hold pins.slots N keeps rows made in batches of N, which
differ slightly from a lone sequence's: replay holds each record to the
tolerance calibrated at its own slot count (--slots), per runtime.

Replay with the tolerance it sets: rig replay FILE --calibration calibration.json

Exit status 1 when a runtime's noise and controls overlap (not separable).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runtime == runtimes.OpenAIServerKind {
				if serverFile == "" {
					return fmt.Errorf("replay calibrate: --runtime openai-server needs --server: the study's design (with --server-arm when several arms have a server block) or a file holding the server block")
				}
				spec, err := replay.LoadServerSpec(serverFile, serverArm)
				if err != nil {
					return err
				}
				req.Server = &spec
			}
			return runReplayCalibrate(cmd, &req, runtime, out, asJSON)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the calibration (JSON) to this file (required)")
	cmd.Flags().StringVar(&runtime, "runtime", "both", "llama-server, ollama, both, or openai-server (with --server)")
	cmd.Flags().StringVar(&serverFile, "server", "", "with --runtime openai-server: the design whose arm describes the server, or a file holding its server block")
	cmd.Flags().StringVar(&serverArm, "server-arm", "", "with --server DESIGN: the arm whose server is calibrated (default: the one arm with a server block)")
	cmd.Flags().StringVar(&req.Model, "model", "smollm2-135m-instruct", "the model whose replay is calibrated (registry name)")
	cmd.Flags().StringVar(&req.Control, "control", "gemma-3-270m", "another provisioned model, for the swapped-model control")
	cmd.Flags().IntVar(&req.Rows, "rows", 40, "genuine rows generated on --model, per runtime")
	cmd.Flags().IntVar(&req.ControlRows, "control-rows", 12, "rows generated on --control, per runtime")
	cmd.Flags().IntVar(&req.MaxTokens, "max-tokens", 16, "output cap of every generated row")
	cmd.Flags().StringVar(&req.WorkDir, "work-dir", "", "keep the records and runtime logs here (default: a temporary directory, removed after)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the calibration as JSON")
	cmd.Flags().BoolVar(&req.NoSandbox, "no-sandbox", false, "run without network namespaces")
	cmd.Flags().StringVar(&req.Mode, "mode", replay.ModeExact, "exact or prefill: the replay mode the tolerance is for (prefill: llama-server only)")
	cmd.Flags().IntSliceVar(&req.Slots, "slots", []int{1}, "slot counts to calibrate at, each its own tolerance: at N the genuine rows are generated N at a time on a runtime serving N slots (an arm's pins.slots), and replayed alone")
	return cmd
}

// runReplayCalibrate measures the calibration req asks for on the runtimes
// named, writes it to out and prints it, and fails a runtime whose genuine
// rows and controls overlap.
func runReplayCalibrate(cmd *cobra.Command, req *replay.ReplayCalibrationRequest, runtime, out string, asJSON bool) error {
	if out == "" {
		return fmt.Errorf("replay calibrate: --out is required (the file the calibration is written to, e.g. --out calibration.json)")
	}
	var err error
	if runtime == runtimes.OpenAIServerKind {
		req.Runtimes = []string{runtime}
	} else if req.Runtimes, err = replayRuntimes("replay calibrate", runtime); err != nil {
		return err
	}
	cal, err := replay.CalibrateReplay(cmd.Context(), *req)
	if err != nil {
		return err
	}
	if err := cal.WriteFile(out); err != nil {
		return fmt.Errorf("replay calibrate: --out %s: %w", out, err)
	}
	if asJSON {
		b, err := json.MarshalIndent(cal, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), string(b))
	} else {
		if err := cal.WriteText(cmd.OutOrStdout()); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "calibration written to %s\n", out)
	}
	for _, rc := range cal.Runtimes {
		if !rc.Separable() {
			return fmt.Errorf("replay calibrate: on %s the genuine rows and the controls overlap (see the rates above)", rc.Runtime)
		}
	}
	return nil
}
