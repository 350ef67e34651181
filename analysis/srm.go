package analysis

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// SRMAlpha is the p-value under which a sample-ratio mismatch is flagged.
// It is strict on purpose: the test runs on every study, and a mismatch is
// a reason to look at the failures, not a finding about the models.
const SRMAlpha = 0.001

// SRM is the sample-ratio check of one job kind: did each arm end with the
// share of scored trials the plan gave it? Planned counts every trial the
// plan (or the receipts) name once; scored are those with a counted result.
// The test is Pearson's chi-square goodness of fit of the scored counts to
// the planned shares, with arms−1 degrees of freedom.
type SRM struct {
	JobKind  string   `json:"job_kind"`
	Arms     []string `json:"arms"`
	Planned  []int    `json:"planned"`
	Scored   []int    `json:"scored"`
	ChiSq    Num      `json:"chi_sq"`
	DF       int      `json:"df"`
	P        Num      `json:"p"`
	Alpha    float64  `json:"alpha"`
	Mismatch bool     `json:"mismatch"`
}

func (s SRM) String() string {
	var parts []string
	for i, a := range s.Arms {
		parts = append(parts, fmt.Sprintf("%s %d/%d", a, s.Scored[i], s.Planned[i]))
	}
	verdict := "no mismatch"
	if s.Mismatch {
		verdict = "sample-ratio mismatch"
	}
	return fmt.Sprintf("%s: scored/planned %s; chi-square %.3g, df %d, p %.3g (flagged under %g): %s",
		s.JobKind, strings.Join(parts, ", "), float64(s.ChiSq), s.DF, float64(s.P), s.Alpha, verdict)
}

// srms checks every job kind with two or more arms.
func srms(kinds []KindResult, trials []Trial) []SRM {
	type key struct {
		arm, kind, task string
		repeat          int
	}
	planned, scored := map[key]bool{}, map[key]bool{}
	for _, t := range trials {
		k := key{t.Arm, t.JobKind, t.Task, t.Repeat}
		planned[k] = true
		if !t.Missing && !t.Preempted {
			scored[k] = true
		}
	}
	var out []SRM
	for _, kr := range kinds {
		if len(kr.Arms) < 2 {
			continue
		}
		s := SRM{JobKind: kr.JobKind, DF: len(kr.Arms) - 1, Alpha: SRMAlpha}
		for _, a := range kr.Arms {
			s.Arms = append(s.Arms, a.Arm)
			var np, ns int
			for k := range planned {
				if k.arm == a.Arm && k.kind == kr.JobKind {
					np++
					if scored[k] {
						ns++
					}
				}
			}
			s.Planned, s.Scored = append(s.Planned, np), append(s.Scored, ns)
		}
		s.ChiSq, s.P = chiSquareGOF(s.Scored, s.Planned, s.DF)
		s.Mismatch = s.P.Valid() && float64(s.P) < s.Alpha
		out = append(out, s)
	}
	return out
}

// chiSquareGOF is Pearson's statistic of observed against the shares of
// planned, and its upper-tail p-value; NaN when nothing was planned or
// scored.
func chiSquareGOF(observed, planned []int, df int) (Num, Num) {
	var no, np int
	for i := range observed {
		no += observed[i]
		np += planned[i]
	}
	if no == 0 || np == 0 || df < 1 {
		return Num(math.NaN()), Num(math.NaN())
	}
	var x float64
	for i, o := range observed {
		e := float64(no) * float64(planned[i]) / float64(np)
		if e == 0 {
			if o > 0 {
				return Num(math.Inf(1)), 0
			}
			continue
		}
		x += (float64(o) - e) * (float64(o) - e) / e
	}
	return Num(x), Num(distuv.ChiSquared{K: float64(df)}.Survival(x))
}
