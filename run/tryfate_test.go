package run

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rig/studies"
)

// newcomerRule is the newcomer's design of issue 47: one job kind, an
// incumbent and a challenger, and a rule whose first clause is
// "underpowered", sized to see a stated difference at a pilot discordance
// of 0.5 (27 tasks detect 0.381 there).
func newcomerRule(stated float64) *studies.Design {
	return &studies.Design{
		JobKinds: []studies.JobKind{{Name: "capital"}},
		Arms:     []studies.Arm{{Name: "chat", Role: studies.RoleIncumbent}, {Name: "few-shot", Role: studies.RoleCandidate}},
		DecisionRule: studies.DecisionRule{Alpha: 0.05, Otherwise: "keep the incumbent", Clauses: []studies.Clause{
			{When: studies.WhenUnderpowered, Assign: studies.OutcomeNoDecision},
			{When: studies.WhenChallengerBetter, Assign: "switch to the challenger"},
		}},
		Power: studies.Power{PilotDiscordance: 0.5, SmallestDetectableDifference: stated, TaskCount: 27, Power: 0.8},
	}
}

func taskIDs(n int) map[string][]string {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("t%d", i))
	}
	return map[string][]string{"capital": ids}
}

// The rule's fate is told before the run, and what it says would let the
// trials decide does: the task count it names and the difference it names
// each make the fate uncertain again.
func TestFateOfRuleNewcomer(t *testing.T) {
	d := newcomerRule(0.35)
	f := FateOfRule(d, taskIDs(27))
	if !f.Certain || f.Outcome != studies.OutcomeNoDecision || f.Clause != 1 {
		t.Fatalf("27 tasks at discordance 0.5 cannot see 0.35, so the rule can only say no decision; got %+v", f)
	}
	t.Log(f.Warning)
	if !strings.HasPrefix(f.Warning, "with 27 tasks this rule can only say no decision at this sample size") {
		t.Errorf("warning = %q", f.Warning)
	}
	m := regexp.MustCompile(`it needs (\d+) tasks to see 0\.35, or a stated difference of (0\.\d\d)`).FindStringSubmatch(f.Warning)
	if m == nil {
		t.Fatalf("the warning names neither the tasks needed nor the difference seen: %q", f.Warning)
	}
	need, _ := strconv.Atoi(m[1])
	if g := FateOfRule(d, taskIDs(need)); g.Certain {
		t.Errorf("with the %d tasks the warning names, the rule is still certain: %+v", need, g)
	}
	if g := FateOfRule(d, taskIDs(need-1)); !g.Certain {
		t.Errorf("with %d tasks, one fewer than named, the rule should still be certain", need-1)
	}
	diff, _ := strconv.ParseFloat(m[2], 64)
	if g := FateOfRule(newcomerRule(diff), taskIDs(27)); g.Certain {
		t.Errorf("with the stated difference the warning names (%.2f), the rule is still certain: %+v", diff, g)
	}
}

// A rule whose first clause reads the trials has no fate before them, and
// a rule with no power statement is never underpowered.
func TestFateOfRuleUndecided(t *testing.T) {
	d := newcomerRule(0.40)
	d.DecisionRule.Clauses[0], d.DecisionRule.Clauses[1] = d.DecisionRule.Clauses[1], d.DecisionRule.Clauses[0]
	if f := FateOfRule(d, taskIDs(5)); f.Certain {
		t.Errorf("a rule that reads the trials first is not certain: %+v", f)
	}
	d = newcomerRule(0.40)
	d.Power = studies.Power{}
	if f := FateOfRule(d, taskIDs(5)); f.Certain {
		t.Errorf("no power statement: the analysis never holds underpowered, so neither does the fate: %+v", f)
	}
}

// The pilot reads discordance, capped and off-task shares, and says plainly
// when an arm passes nothing.
func TestPilotFigures(t *testing.T) {
	d := newcomerRule(0.35)
	var trials []TryTrial
	for i, pass := range []bool{true, false, true, false} {
		task := fmt.Sprintf("t%d", i)
		trials = append(trials,
			TryTrial{Arm: "few-shot", JobKind: "capital", Task: task, Outcome: "scored", Graded: true, Pass: pass, Output: "Paris"},
			TryTrial{Arm: "chat", JobKind: "capital", Task: task, Outcome: "capped", Graded: true, Capped: true,
				Prompt: "What is the capital city of France? Answer with one word.", Output: "", OffTask: "no answer"})
	}
	p := Pilot(d, taskIDs(27), trials)
	if len(p.Pairs) != 1 {
		t.Fatalf("pairs = %+v", p.Pairs)
	}
	pp := p.Pairs[0]
	if pp.Tasks != 4 || pp.Discordant != 2 || pp.Discordance != 0.5 || !(pp.Lo < 0.5 && pp.Hi > 0.5) {
		t.Errorf("pair = %+v, want 2 discordant of 4 with an interval around 0.5", pp)
	}
	if pp.PlannedTasks != 27 || !pp.Detectable || pp.MinDetectable <= 0.35 {
		t.Errorf("27 tasks at 0.5 detect more than 0.35: %+v", pp)
	}
	var chat PilotArm
	for _, a := range p.Arms {
		if a.Arm == "chat" {
			chat = a
		}
	}
	if chat.Trials != 4 || chat.Passed != 0 || chat.Capped != 4 || chat.OffTask != 4 {
		t.Errorf("chat arm = %+v", chat)
	}
	joined := strings.Join(p.Notes, "\n")
	for _, want := range []string{"arm chat passes nothing (0 of 4)", "with 27 tasks this rule can only say no decision"} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes do not say %q:\n%s", want, joined)
		}
	}
}
