package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"rig/fidelity"
	"rig/internal/provision"
)

// fidelityFlags are what `rig fidelity` and `rig bench fidelity` share.
type fidelityFlags struct {
	reference string
	arms      []string
	text      string
	ctx       int
	threads   int
	workDir   string
	noSandbox bool
}

func (f *fidelityFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.reference, "reference", "", "the reference model file (GGUF); its distribution is the one each arm is held to")
	cmd.Flags().StringArrayVar(&f.arms, "arm", nil, "an arm's model file (GGUF, same tokenizer as the reference); repeat for more arms")
	cmd.Flags().StringVar(&f.text, "text", "", "the text to score (UTF-8, tokenized by the reference's tokenizer)")
	cmd.Flags().IntVar(&f.ctx, "ctx", 512, "tokens per chunk; the second half of each chunk is scored, as llama-perplexity -c does")
	cmd.Flags().IntVar(&f.threads, "threads", 0, "threads the scorer runs on (0: every core)")
	cmd.Flags().StringVar(&f.workDir, "work-dir", "", "keep the scorer's scratch and logs here (default: a temporary directory, removed after)")
	cmd.Flags().BoolVar(&f.noSandbox, "no-sandbox", false, "run the scorer without rig's sandbox")
}

// request checks the flags and the provisioned scorer; cleanup removes a
// temporary work folder.
func (f *fidelityFlags) request(command string) (req fidelity.TextRequest, cleanup func(), err error) {
	cleanup = func() {}
	switch {
	case f.reference == "":
		return req, cleanup, fmt.Errorf("%s: --reference: give the reference model file (for example the Q8_0 of the arm's model)", command)
	case len(f.arms) == 0:
		return req, cleanup, fmt.Errorf("%s: --arm: give at least one arm's model file", command)
	case f.text == "":
		return req, cleanup, fmt.Errorf("%s: --text: give a text file to score", command)
	case f.ctx < 8:
		return req, cleanup, fmt.Errorf("%s: --ctx %d: use 8 or more (llama-perplexity's usual is 512)", command, f.ctx)
	}
	for _, p := range append([]string{f.reference, f.text}, f.arms...) {
		if _, err := os.Stat(p); err != nil {
			return req, cleanup, fmt.Errorf("%s: %w", command, err)
		}
	}
	// The tokenizers are checked from the headers first, on a machine
	// with no setup too.
	for _, a := range f.arms {
		if err := fidelity.SameTokenizer(f.reference, a); err != nil {
			return req, cleanup, fmt.Errorf("%s: %w", command, err)
		}
	}
	in, err := provision.Load()
	if err != nil {
		return req, cleanup, fmt.Errorf("%s: %w (run make setup: it builds rig-prefill-score)", command, err)
	}
	work := f.workDir
	if work == "" {
		if work, err = os.MkdirTemp("", "rig-fidelity-"); err != nil {
			return req, cleanup, err
		}
		cleanup = func() { os.RemoveAll(work) }
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	req = fidelity.TextRequest{Reference: abs(f.reference), Text: abs(f.text), Ctx: f.ctx, Options: fidelity.DefaultOptions,
		Scorer: fidelity.Scorer{Bin: in.PrefillScorer, Threads: cmp.Or(f.threads, runtime.NumCPU()), Work: work, NoSandbox: f.noSandbox}}
	for _, a := range f.arms {
		req.Arms = append(req.Arms, abs(a))
	}
	return req, cleanup, nil
}

func newFidelityCommand() *cobra.Command {
	var f fidelityFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fidelity --reference REF.gguf --arm ARM.gguf --text FILE",
		Short: "How close each arm's model stays to a reference model on a text: KL divergence per token, with intervals",
		Long: `fidelity measures what a smaller quant (or any model with the reference's
tokenizer) costs where pass rates cannot see it: token by token over a text,
the KL divergence of the arm's next-token distribution from the reference's
over the full vocabulary, whether the two models' top tokens agree, and the
probability each gives the text's next token. It is closeness to the
reference model, not correctness.

The text is tokenized with the reference's tokenizer and cut as llama.cpp's
llama-perplexity --kl-divergence cuts it: whole chunks of --ctx tokens, each
from a fresh cache, the second half of each scored. Each arm is scored with
the reference in one contained rig-prefill-score process (built by make setup
against the pinned llama.cpp libraries), both models loaded. The models must
share the tokenizer: the GGUF headers' tokenizer metadata is hashed, and a
difference is refused.

Per arm it prints the mean KL (nats per token), its 99th percentile and the
top-token agreement, each with a 95% bootstrap interval over chunks (the chunk
is the unit); for two arms or more, each pair's paired difference.
docs/fidelity.md says how the figures are checked against llama-perplexity.

  rig fidelity --reference SmolLM2.Q8_0.gguf --arm SmolLM2.Q4_1.gguf --text wiki.txt
  rig fidelity --reference ref.gguf --arm q4.gguf --arm q5.gguf --text wiki.txt --ctx 256
  rig fidelity --reference ref.gguf --arm q4.gguf --text wiki.txt --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, cleanup, err := f.request("fidelity")
			defer cleanup()
			if err != nil {
				return err
			}
			res, err := fidelity.MeasureText(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("fidelity: %w", err)
			}
			if asJSON {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			}
			return res.WriteText(cmd.OutOrStdout())
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
