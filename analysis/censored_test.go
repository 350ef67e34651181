package analysis

import (
	"context"
	"strings"
	"testing"
)

// TestTruncatedTrialsAreCappedWithAStopCapWarning: a trial cut at the stop
// cap counts in the ranking's Capped column, keeps its grade, and the arm
// gets a warning stating the count and the stop_cap pin. It advises raising
// the cap only when the capped outputs look like answers cut short (some
// passed, none repeats the prompt); for outputs that repeat the prompt, or
// that all failed, it says so and prescribes no larger cap.
func TestTruncatedTrialsAreCappedWithAStopCapWarning(t *testing.T) {
	fact := "apply: cand: 17 of 20 scored trials stopped at the stop cap (stop_cap 64 tokens)"
	tests := []struct {
		name      string
		truncated int // of cand's 20 trials
		echo      bool
		fail      bool // cand fails every task
		wantWarn  []string
		notWarn   []string
	}{
		{name: "none truncated", truncated: 0},
		{name: "most truncated, some passed", truncated: 17, wantWarn: []string{fact, "counted as capped", "passed all the same", "raise arms[].pins.stop_cap for cand", "register it as a new study"}},
		{name: "capped outputs repeat the prompt", truncated: 17, echo: true, wantWarn: []string{fact, "17 of them repeat the task's prompt", "a larger cap would only lengthen"}, notWarn: []string{"raise"}},
		{name: "capped outputs all failed", truncated: 17, fail: true, wantWarn: []string{fact, "None of them passed", "read cand's sampled outputs"}, notWarn: []string{"raise"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			candPass := 0.6
			if tc.fail {
				candPass = 0
			}
			ts := passTrials(1, 20, map[string]float64{"base": 0.5, "cand": candPass}, map[string]float64{"base": 1, "cand": 1})
			n := 0
			for i := range ts {
				if ts[i].Arm == "cand" && n < tc.truncated {
					ts[i].Truncated, ts[i].StopCap, ts[i].RepeatsPrompt = true, 64, tc.echo
					n++
				}
			}
			r, err := Analyse(context.Background(), Input{Design: twoArmDesign(MeasurePass), Trials: ts})
			if err != nil {
				t.Fatal(err)
			}
			var cand ArmResult
			for _, a := range r.Kinds[0].Arms {
				if a.Arm == "cand" {
					cand = a
				}
			}
			if cand.Counts.Capped != tc.truncated || cand.Counts.Truncated != tc.truncated || cand.Counts.Scored != 20 || cand.Tasks != 20 {
				t.Errorf("counts %+v, tasks %d; want %d capped and truncated, all 20 scored", cand.Counts, cand.Tasks, tc.truncated)
			}
			var warns []string
			for _, w := range r.Warnings {
				if strings.Contains(w.Message, "stop cap") {
					warns = append(warns, w.String())
				}
			}
			if len(tc.wantWarn) == 0 {
				if len(warns) > 0 {
					t.Errorf("unexpected stop-cap warnings %q", warns)
				}
				return
			}
			if len(warns) != 1 {
				t.Fatalf("stop-cap warnings %q, want one for cand", warns)
			}
			for _, s := range tc.wantWarn {
				if !strings.Contains(warns[0], s) {
					t.Errorf("warning %q lacks %q", warns[0], s)
				}
			}
			for _, s := range tc.notWarn {
				if strings.Contains(warns[0], s) {
					t.Errorf("warning %q says %q", warns[0], s)
				}
			}
		})
	}
}

// TestMissingPairsAreCountedNamedAndNeverZero: a task one arm lacks (its only
// trial errored) is a missing pair: counted and named per pair, listed as the
// arm's task with no result, left out of the paired test rather than scored
// as zero, and the pair is inconclusive with a warning saying why.
func TestMissingPairsAreCountedNamedAndNeverZero(t *testing.T) {
	tests := []struct {
		name       string
		drop       map[string]string // task -> arm whose trial errored ("both" for both)
		wantPairs  []MissingPair
		wantNoCand []string
		outcome    Outcome
	}{
		{name: "complete", outcome: Improvement},
		{name: "one arm lacks one task, both lack another",
			drop:      map[string]string{"t003": "cand", "t007": "both"},
			wantPairs: []MissingPair{{Task: "t003", Lacks: "cand"}, {Task: "t007", Lacks: "both"}}, wantNoCand: []string{"t003", "t007"}, outcome: Inconclusive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := passTrials(2, 40, map[string]float64{"base": 0.2, "cand": 0.9}, map[string]float64{"base": 1, "cand": 1})
			for i := range ts {
				if a, ok := tc.drop[ts[i].Task]; ok && (a == "both" || a == ts[i].Arm) {
					// An error leaves a pass of false behind: it must not count.
					ts[i] = Trial{DesignHash: "d1", Arm: ts[i].Arm, JobKind: "apply", Task: ts[i].Task, Missing: true, Reason: "error: prompt longer than context"}
				}
			}
			r, err := Analyse(context.Background(), Input{Design: twoArmDesign(MeasurePass), Trials: ts})
			if err != nil {
				t.Fatal(err)
			}
			p := r.Pairs[0]
			if p.MissingTasks != len(tc.wantPairs) || len(p.Missing) != len(tc.wantPairs) || p.Tasks != 40-len(tc.wantPairs) {
				t.Fatalf("missing %d %+v over %d paired tasks; want %+v over %d", p.MissingTasks, p.Missing, p.Tasks, tc.wantPairs, 40-len(tc.wantPairs))
			}
			for i, m := range tc.wantPairs {
				if p.Missing[i] != m {
					t.Errorf("missing[%d] = %+v, want %+v", i, p.Missing[i], m)
				}
			}
			if p.Outcome != tc.outcome {
				t.Errorf("outcome %s (%s), want %s", p.Outcome, p.Reason, tc.outcome)
			}
			var cand ArmResult
			for _, a := range r.Kinds[0].Arms {
				if a.Arm == "cand" {
					cand = a
				}
			}
			if strings.Join(cand.NoResult, ",") != strings.Join(tc.wantNoCand, ",") || cand.Tasks != 40-len(tc.wantNoCand) {
				t.Errorf("cand's tasks with no result %q over %d tasks, want %q", cand.NoResult, cand.Tasks, tc.wantNoCand)
			}
			all := ""
			for _, w := range r.Warnings {
				all += w.String() + "\n"
			}
			if len(tc.wantPairs) == 0 {
				if strings.Contains(all, "missing pairs") {
					t.Errorf("complete data warned about missing pairs:\n%s", all)
				}
				return
			}
			for _, s := range []string{"cand vs base: 2 missing pairs (t003 lacks cand, t007 lacks both)", "neither a zero nor dropped", "the outcome is inconclusive", "why: error: prompt longer than context ×2"} {
				if !strings.Contains(all, s) {
					t.Errorf("warnings lack %q:\n%s", s, all)
				}
			}
		})
	}
}
