package fidelity

import (
	"path/filepath"
	"reflect"
	"testing"
)

// What WriteStudy writes, ReadStudy reads back, in job kind, profile, arm
// and task order.
func TestWriteStudyReadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), StudyFile)
	recs := []StudyRecord{
		{JobKind: "qa", Reference: "q8", Arm: "q8", Task: "t2", RowID: "q8/qa/t2/1#1", ScoredBy: ScoredByStack, Tokens: []Token{{KL: 0, RefTop: 5, ArmTop: 5, RefLogprob: -0.5, ArmLogprob: -0.5}}},
		{JobKind: "qa", Reference: "q8", Arm: "q4", Task: "t2", RowID: "q8/qa/t2/1#1", ScoredBy: ScoredByModel, Tokens: []Token{{KL: 0.01, RefTop: 5, ArmTop: 6, RefLogprob: -0.5, ArmLogprob: -0.7}}},
		{JobKind: "qa", Reference: "q8", Arm: "q4", Task: "t1", RowID: "q8/qa/t1/1#1", ScoredBy: ScoredByModel, Tokens: []Token{{KL: 0.02, RefTop: 1, ArmTop: 1, RefLogprob: -1, ArmLogprob: -1.1}}},
	}
	if err := WriteStudy(path, recs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadStudy(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []StudyRecord{recs[2], recs[1], recs[0]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v\nwant %+v", got, want)
	}
	if u := StudyUnits(got, "qa", "", "q4"); !reflect.DeepEqual(u.Names, []string{"t1", "t2"}) {
		t.Errorf("units %v, want t1, t2", u.Names)
	}
}
