package analysis

import (
	"strings"
	"testing"
)

func TestLevelPercentKeepsItsPrecision(t *testing.T) {
	for level, want := range map[float64]string{0.95: "95%", 1 - 0.05/2: "97.5%", 1 - 0.05/3: "98.33%", 0.99: "99%", 0.999: "99.9%"} {
		if got := LevelPercent(level); got != want {
			t.Errorf("LevelPercent(%v) = %q, want %q", level, got, want)
		}
	}
}

// TestSummaryPrintsTheLevelItHas: a 97.5% level is printed 97.5%, never
// rounded to "98%" (issue 46).
func TestSummaryPrintsTheLevelItHas(t *testing.T) {
	r := &Report{Level: 0.975}
	var b strings.Builder
	if err := r.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "intervals 97.5% (method beside each)") {
		t.Errorf("summary lacks the 97.5%% level:\n%s", b.String())
	}
	if got := r.IntervalText(KindResult{}); !strings.HasPrefix(got, "97.5%;") {
		t.Errorf("interval text %q, want it to begin with the 97.5%% level", got)
	}
}

// TestStopClauseNamesTheIntervalsShown: the trace names the interval each
// monitored pair shows — the stagewise-exact one where the group-sequential
// test set it, the confidence sequence elsewhere — not "confidence
// sequences" for pairs whose shown interval is stagewise-exact (issue 46).
func TestStopClauseNamesTheIntervalsShown(t *testing.T) {
	gs := PairLook{Pair: Pair{Candidate: "a", Baseline: "base"}, JobKind: "apply", Stagewise: &StagewiseInterval{Level: 0.975}}
	cs := PairLook{Pair: Pair{Candidate: "b", Baseline: "base"}, JobKind: "apply"}
	for _, tc := range []struct {
		name    string
		pairs   []PairLook
		early   bool
		want    string
		notWant string
	}{
		{"all stagewise, to the end", []PairLook{gs}, false, "monitored pairs use the sequential p-values and the stagewise-exact intervals", "confidence sequence"},
		{"all stagewise, early", []PairLook{gs}, true, "monitored pairs use the sequential p-values and the stagewise-exact intervals, valid at this stopping time", "confidence sequence"},
		{"all confidence sequences", []PairLook{cs}, true, "monitored pairs use the sequential p-values and confidence sequences, valid at this stopping time", "stagewise"},
		{"mixed", []PairLook{gs, cs}, false, "the stagewise-exact interval for apply a vs base and the confidence sequence for apply b vs base", ""},
	} {
		s := &Sequential{Stopping: Stopping{Method: GroupSequential}, Look: Look{Pairs: tc.pairs}, StoppedEarly: tc.early}
		got := s.stopClause()
		if !strings.Contains(got, tc.want) || (tc.notWant != "" && strings.Contains(got, tc.notWant)) {
			t.Errorf("%s: trace clause %q, want %q and not %q", tc.name, got, tc.want, tc.notWant)
		}
	}
}
