package daemon

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"rig/analysis"
	"rig/internal/atomicfile"
	"rig/studies"
)

// A preview runs the checks a decision runs and writes nothing: the study
// stays frozen, no decision.json, no bank marked used, no key claimed; the
// decision then recorded is the one previewed. A stale hash is refused in
// the preview as in the decision.
func TestDecidePreviewRecordsNothing(t *testing.T) {
	f := newDecideFixture(t)
	req := DecideRequest{Key: "decide-s1", Rationale: "the rule says ship", Actor: "dana"}
	var stale *analysis.StaleHashError
	if _, err := f.decide(DecideRequest{Preview: true, ComparisonHash: strings.Repeat("0", 64), Rationale: "r", Actor: "dana"}); !errors.As(err, &stale) {
		t.Errorf("preview citing a stale hash = %v, want a StaleHashError", err)
	}
	preview := req
	preview.Preview = true
	seen, err := f.decide(preview)
	if err != nil {
		t.Fatal(err)
	}
	if !seen.Preview || seen.Study != "s1" || seen.Execution != f.exec || seen.Action != f.action || seen.Arm != "gemma" ||
		seen.Rationale != req.Rationale || seen.ComparisonHash != f.hash || seen.Actor != "dana" || seen.Proposal != "" {
		t.Errorf("preview = %+v; want a preview of s1's %s decision on %s, citing %s, by dana", seen, f.action, f.exec, f.hash)
	}
	if l, _ := f.s.lifecycle("s1"); l.State != studies.Frozen || l.Outcome != "" {
		t.Errorf("after a preview the lifecycle is %s (outcome %q), want frozen", l.State, l.Outcome)
	}
	if _, err := os.Stat(studyDir(t, f.s, "s1").Decision()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a preview wrote decision.json (stat: %v)", err)
	}
	if _, err := os.Stat(studies.BankUsedFile(f.bank)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a preview marked the bank used (stat: %v)", err)
	}

	// The key was not claimed: the decision goes through under it and is
	// the one previewed.
	rec, err := f.decide(req)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Preview || rec.Proposal == "" {
		t.Errorf("recorded %+v; want a record, not a preview, naming its proposal", rec)
	}
	got, want := rec, seen
	got.At, got.Proposal, want.Preview = want.At, "", false
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %+v, previewed %+v", rec, seen)
	}
	var onDisk DecisionRecord
	if err := atomicfile.ReadJSON(studyDir(t, f.s, "s1").Decision(), &onDisk); err != nil || onDisk.Preview {
		t.Errorf("decision.json %+v (%v); want the record, not marked a preview", onDisk, err)
	}
	// A preview under the used key answers with the recorded decision.
	again, err := f.decide(preview)
	if err != nil || again.Preview || !again.At.Equal(rec.At) {
		t.Errorf("preview under a used key = %+v, %v; want the recorded decision", again, err)
	}
	// Decided is final: a preview without the key is refused as the
	// decision would be.
	if _, err := f.decide(DecideRequest{Preview: true, Rationale: "r", Actor: "dana"}); !errors.Is(err, studies.ErrTransition) {
		t.Errorf("preview of a second decision = %v, want a refused transition", err)
	}
}
