package fidelity

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// TextRequest asks for each arm's fidelity to Reference on a fixed text, cut
// into chunks of Ctx tokens as llama-perplexity cuts it.
type TextRequest struct {
	Reference string
	Arms      []string
	Text      string
	Ctx       int
	Scorer    Scorer
	Options   Options
}

// TextResult is every arm's figures and each pair's paired difference.
type TextResult struct {
	Reference  string       `json:"reference"`
	Text       string       `json:"text"`
	Ctx        int          `json:"ctx"`
	TextTokens int          `json:"text_tokens"`
	Chunks     int          `json:"chunks"`
	Arms       []Figures    `json:"arms"`
	Pairs      []Difference `json:"pairs,omitempty"`
	SystemInfo string       `json:"system_info"`
	// Busy is the scorer's time past loading, per arm (reference and arm
	// passes together).
	Busy []Busy `json:"busy"`

	segs  []Segment
	units []Units
}

// MeasureText checks every arm's tokenizer against the reference's, cuts
// the text with it, scores each arm against the reference and summarizes.
func MeasureText(ctx context.Context, req TextRequest) (TextResult, error) {
	res := TextResult{Reference: req.Reference, Text: req.Text, Ctx: req.Ctx}
	if len(req.Arms) == 0 {
		return res, fmt.Errorf("no arm to compare with the reference (give --arm MODEL.gguf)")
	}
	for _, arm := range req.Arms {
		if err := SameTokenizer(req.Reference, arm); err != nil {
			return res, err
		}
	}
	toks, err := req.Scorer.Tokenize(ctx, req.Reference, req.Text)
	if err != nil {
		return res, err
	}
	res.TextTokens = len(toks.IDs)
	if res.segs, err = Chunks(toks, req.Ctx); err != nil {
		return res, fmt.Errorf("%s: %w", req.Text, err)
	}
	res.Chunks = len(res.segs)
	for _, arm := range req.Arms {
		run, err := req.Scorer.Score(ctx, req.Reference, arm, req.Ctx, res.segs)
		if err != nil {
			return res, err
		}
		u, err := Group(Label(arm), res.segs, run.Tokens)
		if err != nil {
			return res, err
		}
		f, err := Summarize(ctx, u, req.Options)
		if err != nil {
			return res, err
		}
		res.units = append(res.units, u)
		res.Arms = append(res.Arms, f)
		res.Busy = append(res.Busy, run.Busy)
		res.SystemInfo = run.SystemInfo
	}
	for i := range res.units {
		for j := i + 1; j < len(res.units); j++ {
			d, err := Compare(ctx, res.units[i], res.units[j], req.Options)
			if err != nil {
				return res, err
			}
			res.Pairs = append(res.Pairs, d)
		}
	}
	return res, nil
}

// Segments are the chunks the result scored, for a caller that times them.
func (r TextResult) Segments() []Segment { return r.segs }

// Label names a model file in tables: its file name without .gguf.
func Label(path string) string { return strings.TrimSuffix(filepath.Base(path), ".gguf") }

// WriteText prints the result as a table with its intervals.
func (r TextResult) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Fidelity to the reference %s: closeness to the reference model, not correctness.\n", Label(r.Reference))
	scored := 0
	if len(r.Arms) > 0 {
		scored = r.Arms[0].Tokens
	}
	fmt.Fprintf(w, "Text %s: %d tokens, %d chunks of %d; the second half of each chunk scored (%d tokens), as llama-perplexity --kl-divergence scores it.\n",
		r.Text, r.TextTokens, r.Chunks, r.Ctx, scored)
	level := 0.95
	if len(r.Arms) > 0 {
		level = r.Arms[0].MeanKL.Interval.Level
	}
	fmt.Fprintf(w, "Intervals: %.0f%% bootstrap over the %d chunks (the chunk is the unit).\n\n", 100*level, r.Chunks)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "arm\ttokens\tmean KL (nats/token)\tp99 KL\ttop-token agreement\tp(text token): ref, arm\t")
	for _, f := range r.Arms {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%.3f, %.3f\t\n", f.Arm, f.Tokens, estimate(f.MeanKL, 1, "%.5f", ""), estimate(f.P99KL, 1, "%.4f", ""),
			estimate(f.TopAgreement, 100, "%.2f", "%"), f.RefProb, f.ArmProb)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Pairs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nPaired differences (second arm less first, chunk by chunk):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pair\tmean KL\tp99 KL\ttop-token agreement\t")
	for _, d := range r.Pairs {
		fmt.Fprintf(tw, "%s − %s\t%s\t%s\t%s\t\n", d.B, d.A, estimate(d.MeanKL, 1, "%+.5f", ""), estimate(d.P99KL, 1, "%+.4f", ""), estimate(d.TopAgreement, 100, "%+.2f", " pt"))
	}
	return tw.Flush()
}

// estimate prints a figure scaled by scale in verb, then unit, then its
// interval in the same verb.
func estimate(e Estimate, scale float64, verb, unit string) string {
	return fmt.Sprintf(verb+"%s ["+verb+", "+verb+"]", scale*e.Value, unit, scale*float64(e.Interval.Lo), scale*float64(e.Interval.Hi))
}
