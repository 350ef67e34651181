package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"rig/preflight"
)

func newPreflightCommand() *cobra.Command {
	var profile, kv, runtime string
	var context int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "preflight MODEL --profile CARD",
		Short: "Decide, before any run, whether a GGUF model fits a card profile",
		Long: `preflight reads a GGUF model file's metadata, predicts the peak memory a run
needs on the card for the runtime (weights, KV cache at the context, compute
and output buffers, the runtime's own overhead), and gives a verdict: "fits"
with its margin, or "doesn't fit at this card". The margin must exceed the
memory model's measured error before rig trusts it; the calibration it uses is
named in the output. A simulated card is a memory reservation: it reproduces
what fits, not a smaller card's speed.

--profile is a card size (8GiB) or the full form
  card=8GiB,ctx=8192,kv=q8_0,offload=all,host=32GiB,np=1,quant=Q4_K_M,name=sim-8g
(nvml=N names a real card instead of a simulated one). --context and --kv, when
given, override what --profile says; the context defaults to 4096.

Example:
  rig preflight ~/.cache/rig/models/smollm2.gguf --profile 8GiB --context 8192 --kv q8_0

Exit status 0 when the model fits; 1 when it does not fit at this card, or the
model or profile cannot be read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := preflight.ParseProfile(profileSpec(cmd, profile, context, kv))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				w = io.Discard
			}
			v, err := preflight.Run(cmd.Context(), w, args[0], p, runtime, nil)
			if err != nil {
				return err
			}
			if asJSON {
				j, err := v.JSON()
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), strings.TrimSpace(string(j)))
			}
			if !v.Fits {
				return fmt.Errorf("%s: %s %s (see the verdict above)", args[0], v.Outcome, p.Name)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&profile, "profile", "", "card size (8GiB) or card=8GiB,ctx=...,kv=... (required)")
	f.IntVar(&context, "context", 0, "context length the arm pins (default 4096 unless --profile says)")
	f.StringVar(&kv, "kv", "", "KV cache type: f16, q8_0 or q4_0 (default f16 unless --profile says)")
	f.StringVar(&runtime, "runtime", preflight.RuntimeLlamaServer, "runtime whose memory model to use: llama-server, ollama or openai-server (a generic server, sized from the GGUF)")
	f.BoolVar(&asJSON, "json", false, "print the verdict as JSON instead of text")
	_ = cmd.MarkFlagRequired("profile")
	return cmd
}

// profileSpec turns the flags into ParseProfile's form. Later keys win in
// ParseProfile, so the default context goes first and the flags last.
func profileSpec(cmd *cobra.Command, profile string, context int, kv string) string {
	if !strings.Contains(profile, "=") {
		profile = "card=" + profile
	}
	spec := "ctx=4096," + profile
	if cmd.Flags().Changed("context") {
		spec += fmt.Sprintf(",ctx=%d", context)
	}
	if cmd.Flags().Changed("kv") {
		spec += ",kv=" + kv
	}
	return spec
}
