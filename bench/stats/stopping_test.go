package stats

import (
	"rig/internal/testenv"

	"context"
	"strings"
	"testing"

	"rig/analysis"
)

// TestStoppingGoals is the seeded simulation of docs/statistics.md's
// "Early stopping" goals, at a size that runs in seconds; `rig bench stats
// --stopping` runs the long version.
func TestStoppingGoals(t *testing.T) {
	testenv.Long(t, "the stopping simulation")
	ctx := context.Background()
	for _, s := range []analysis.Stopping{
		{Method: analysis.GroupSequential, Spending: analysis.OBrienFleming, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
		{Method: analysis.GroupSequential, Spending: analysis.Pocock, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
		{Method: analysis.Anytime, Alpha: 0.05, Futility: 0.2, Discordance: 0.3},
	} {
		name := string(s.Method) + "/" + string(s.Spending)
		rows, err := StoppingGoals(ctx, s, 600, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if !r.Pass && !(s.Method == analysis.Anytime && r.Goal == GoalPower) {
				t.Errorf("%s: %s: %s", name, r.Setting, r.Detail)
			}
		}
		// The anytime test pays for looking at every block with power:
		// the price is stated in the docs, and checked to stay what they say.
		if s.Method == analysis.Anytime {
			for _, r := range rows {
				// Documented: 6 to 7 points at 4,000 studies; 600 studies
				// leave about ±1.5 of noise.
				if r.Goal == GoalPower && r.Got-r.Fixed < -0.1 {
					t.Errorf("anytime power %v against fixed %v: more than the documented loss", r.Got, r.Fixed)
				}
			}
		}
	}
}

// TestPromiseMatchesTheRunner: the dry run's promise (the very call the
// dry run makes) and the runner's walk replayed on other draws stop early,
// and settle the first pair as futile, at the same rates within sampling
// error, in the shape of issue 46's study (two challengers, 27 tasks) and
// on one pair of 100 tasks; and a study whose arms agree on every task is
// promised, and gets, an early futility stop.
func TestPromiseMatchesTheRunner(t *testing.T) {
	testenv.Long(t, "the stopping simulation")
	ctx := context.Background()
	for i, st := range PromiseSettings() {
		if i == 2 {
			continue // the O'Brien–Fleming 100-task setting: the bench runs it
		}
		rows, err := CheckPromise(ctx, st.Name, st.Rule, st.Shape, 200, 9)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if !r.Pass {
				t.Errorf("%s, %s: promised %+v, replayed %+v", r.Setting, r.Truth, r.Promised, r.Replayed)
			}
		}
		agree := rows[len(rows)-1]
		if !strings.Contains(agree.Truth, "agreeing") || agree.Promised.Stopped != 1 || agree.Replayed.Futile != 1 || agree.Replayed.Tasks >= float64(st.Shape.Tasks) {
			t.Errorf("%s: arms agreeing on every task: promised %+v, replayed %+v; want every study stopped early as futile", st.Name, agree.Promised, agree.Replayed)
		}
		if null := rows[len(rows)-2]; null.Truth != "no difference" || null.Promised.Futile == 0 {
			t.Errorf("%s: %s: no futility stop promised (%+v)", st.Name, null.Truth, null.Promised)
		}
	}
}
