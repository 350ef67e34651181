package findings

import (
	"testing"

	"rig/genrecord"
	"rig/licences"
	"rig/preflight"
	"rig/receipts"
	"rig/report"
	"rig/studies"
)

// TestKeptReadsRowsByTrialKey: a generation row is filed under the trial
// key its prompt names; the first row of an arm's task is its output; only
// a candidate's call that repeats its prompt is an echo, and a row whose
// prompt names no trial is passed over.
func TestKeptReadsRowsByTrialKey(t *testing.T) {
	prompt := "Extract the invoice number and the total from this message as JSON with the fields number and total. Message: invoice 4417 was paid on Monday."
	echo := "Extract the invoice number and the total from this message as JSON with the fields number and total. Message: invoice 4417 was paid"
	var k Kept
	for _, r := range []genrecord.Row{
		{Prompt: "a/qa/t1/1#1", Role: genrecord.RoleCandidate, RenderedPrompt: prompt, Text: echo},
		{Prompt: "a/qa/t1/2#1", Role: genrecord.RoleCandidate, RenderedPrompt: prompt, Text: "second repeat"},
		{Prompt: "a/qa/t2/1#1", Role: genrecord.RoleCandidate, RenderedPrompt: prompt, Text: `{"number": "4417"}`},
		{Prompt: "judge/qa/t3/1#1", Role: genrecord.RoleJudge, RenderedPrompt: prompt, Text: echo},
		{Prompt: "validation-1", Role: genrecord.RoleCandidate, RenderedPrompt: prompt, Text: echo},
	} {
		k.Add(r)
	}
	if got := k.Outputs[studies.TrialKey{Arm: "a", JobKind: "qa", Task: "t1"}]; got != echo {
		t.Errorf("output of a/qa/t1 = %q; want the first row's text", got)
	}
	if len(k.Echoes) != 1 || !k.Echoes[studies.TrialKey{Arm: "a", JobKind: "qa", Task: "t1", Repeat: 1}] {
		t.Errorf("echoes %v; want only a/qa/t1/1", k.Echoes)
	}
	if len(k.Outputs) != 3 {
		t.Errorf("outputs %v; want a/qa/t1, a/qa/t2 and the judge's, not the unkeyed row", k.Outputs)
	}
}

// TestInputMarksEchoesAndDropsUnfitCells: Input puts the echoes on the
// trials they name and leaves out a card cell the preflight says does not
// fit; the planned trial with no receipt is missing.
func TestInputMarksEchoesAndDropsUnfitCells(t *testing.T) {
	d := &studies.Design{Kind: studies.KindCard,
		Arms:     []studies.Arm{{Name: "m@big", Role: studies.RoleIncumbent}, {Name: "m@small", Role: studies.RoleCandidate}},
		JobKinds: []studies.JobKind{{Name: "qa", RankingMeasure: studies.Measure{Name: "pass_rate"}}}}
	rec := func(arm, task string) receipts.Receipt {
		return receipts.Receipt{DesignHash: "h", Arm: arm, JobKind: "qa", TaskID: task, Repeat: 1, Attempt: 1, Outcome: receipts.Scored, Grade: &receipts.Grade{Pass: true, Score: 1}}
	}
	plan := &studies.Plan{Trials: []studies.Trial{{Key: studies.TrialKey{Arm: "m@big", JobKind: "qa", Task: "t1", Repeat: 1}},
		{Key: studies.TrialKey{Arm: "m@big", JobKind: "qa", Task: "t2", Repeat: 1}}, {Key: studies.TrialKey{Arm: "m@small", JobKind: "qa", Task: "t1", Repeat: 1}}}}
	ev := &Evidence{Snapshot: &studies.Snapshot{DesignHash: "h"}, Design: d, Plan: plan,
		Receipts: []receipts.Receipt{rec("m@big", "t1"), rec("m@small", "t1")},
		Verdicts: map[string]preflight.Verdict{"m@big": {Fits: true}, "m@small": {Fits: false, Reason: "needs 2 GiB"}},
		Kept:     Kept{Echoes: map[studies.TrialKey]bool{{Arm: "m@big", JobKind: "qa", Task: "t1", Repeat: 1}: true}}}
	if !d.IsCardStudy() {
		t.Fatal("fixture: want a card sub-study")
	}
	in := Input(ev)
	if len(in.Design.Arms) != 1 || in.Design.Arms[0].Name != "m@big" {
		t.Errorf("arms %+v; want m@small left out (it does not fit)", in.Design.Arms)
	}
	var echoed, missing int
	for _, tr := range in.Trials {
		if tr.Arm == "m@small" {
			t.Errorf("trial %+v of the unfit cell kept", tr)
		}
		if tr.RepeatsPrompt {
			echoed++
			if tr.Task != "t1" {
				t.Errorf("echo on %s; want t1", tr.Task)
			}
		}
		if tr.Missing {
			missing++
			if tr.Task != "t2" || tr.Reason != "no counted receipt" {
				t.Errorf("missing trial %+v; want t2 with no counted receipt", tr)
			}
		}
	}
	if echoed != 1 || missing != 1 {
		t.Errorf("%d echoed and %d missing trials; want 1 and 1", echoed, missing)
	}
}

// TestLicenceRowsFromLines: the report's licence rows take the use and
// verdict from the registry's line for the item, as values; a name with a
// comma and a registry path with ") from " in it no longer confuse it, and
// an item without a line keeps its design use and no verdict.
func TestLicenceRowsFromLines(t *testing.T) {
	items := []studies.Item{
		{Role: "writer", Name: "Model, small", RegistryID: "m-small", Use: "inference"},
		{Role: "dataset", Name: "bank", RegistryID: "bank", Use: "evaluation"},
	}
	lines := []licences.Line{{Item: licences.Item{Role: "writer", Name: "Model, small", RegistryID: "m-small", Use: "inference"},
		EntryID: "m-small", Verdict: "allowed", Registry: "/reg) from (x/registry.json"}}
	got := licenceRows(items, lines)
	want := []report.Licence{{Item: "Model, small", Entry: "m-small", Use: "inference", Verdict: "allowed"}, {Item: "bank", Entry: "bank", Use: "evaluation"}}
	if len(got) != len(want) {
		t.Fatalf("rows %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v; want %+v", i, got[i], want[i])
		}
	}
}

// TestReplayByTrial: a trial's replay status is its worst call's; a record
// whose stack differs marks no trial (it has no per-row results).
func TestReplayByTrial(t *testing.T) {
	sums := []genrecord.Summary{
		{Path: "/x/a.jsonl", Status: genrecord.StatusReproduced, Results: []genrecord.RowResult{
			{RowID: "a/qa/t1/1#1", Status: genrecord.StatusReproduced},
			{RowID: "a/qa/t1/1#1-call2", Status: genrecord.StatusMismatch},
			{RowID: "a/qa/t2/1#1", Status: genrecord.StatusReproduced},
		}},
		{Path: "/x/b.jsonl", Status: genrecord.StatusStackDiffers, Results: []genrecord.RowResult{{RowID: "b/qa/t1/1#1", Status: genrecord.StatusReproduced}}},
	}
	got := replayByTrial(sums)
	want := map[studies.TrialKey]report.ReplayStatus{{Arm: "a", JobKind: "qa", Task: "t1", Repeat: 1}: report.Mismatch, {Arm: "a", JobKind: "qa", Task: "t2", Repeat: 1}: report.Reproduced}
	if len(got) != len(want) {
		t.Fatalf("replay by trial %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q; want %q", k, got[k], v)
		}
	}
	rp := Replay(sums)
	if rp == nil || len(rp.Rows) != 4 || rp.Rows[3].Status != report.StackDiffers || rp.Rows[1].Status != report.Mismatch {
		t.Errorf("replay section %+v; want three row lines and one stack-differs line", rp)
	}
	if Replay(nil) != nil {
		t.Error("an execution never replayed has a replay section")
	}
}
