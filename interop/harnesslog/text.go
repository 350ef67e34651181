package harnesslog

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"rig/analysis"
)

// WriteText prints the comparison for a reader: the label, the two logs,
// and one row per task × metric with each side's mean and interval, the
// paired difference and its interval, the test, its p before and after
// Holm, B's P(best) and the smallest difference the pairs detect at 80%
// power.
func (c *Comparison) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s\n\n", c.Evidence)
	fmt.Fprintf(w, "A  %s  (%s, %d samples)\n", c.A.Model, c.A.Source, c.A.Samples)
	fmt.Fprintf(w, "B  %s  (%s, %d samples)\n", c.B.Model, c.B.Source, c.B.Samples)
	fmt.Fprintf(w, "unpaired samples: %d of A, %d of B (left out)\n\n", c.UnpairedA, c.UnpairedB)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "task/metric\tmeasure\tpairs\tA mean [95%]\tB mean [95%]\tB-A [95%]\ttest\tp\tp Holm\tP(B best)\tdetectable at 80%")
	kinds := map[string]analysis.KindResult{}
	for _, k := range c.Report.Kinds {
		kinds[k.JobKind] = k
	}
	for _, p := range c.Report.Pairs {
		k := kinds[p.JobKind]
		a, b := armOf(k, c.A.Arm), armOf(k, c.B.Arm)
		test := p.Test
		if p.McNemar != nil {
			test = fmt.Sprintf("%s (B only %d, A only %d)", p.Test, p.McNemar.CandidateOnly, p.McNemar.BaselineOnly)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.JobKind, k.Measure, p.Tasks,
			meanIv(a.Mean, a.Interval), meanIv(b.Mean, b.Interval), meanIv(p.Delta, p.Interval), test,
			num(p.P), num(p.PHolm), num(b.PBest), num(p.MinDetectable))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range c.Skipped {
		fmt.Fprintf(w, "left out: %s\n", s)
	}
	fmt.Fprintf(w, "\nHolm's correction runs across the %d task × metric rows; alpha %g.\n", len(c.Report.Pairs), c.Report.Alpha)
	return nil
}

func armOf(k analysis.KindResult, arm string) analysis.ArmResult {
	for _, a := range k.Arms {
		if a.Arm == arm {
			return a
		}
	}
	return analysis.ArmResult{Mean: analysis.Num(math.NaN()), PBest: analysis.Num(math.NaN())}
}

func num(n analysis.Num) string {
	if !n.Valid() {
		return "-"
	}
	return fmt.Sprintf("%.4g", float64(n))
}

func meanIv(m analysis.Num, iv analysis.Interval) string {
	if !iv.Lo.Valid() || !iv.Hi.Valid() {
		return num(m)
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", float64(m), float64(iv.Lo), float64(iv.Hi))
}
