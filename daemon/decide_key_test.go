package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rig/analysis"
	"rig/internal/atomicfile"
	"rig/studies"
	"rig/studies/studytest"
	"rig/tasks"
)

const dkHeader = `{"schema_version":1,"job_kind":"qa","bank_version":"1"}`

func dkTask(id string, holdout bool) string {
	h := "false"
	if holdout {
		h = "true"
	}
	return `{"id":"` + id + `","job_kind":"qa","template_id":"t1","difficulty":"easy","input":{"prompt":"What is 2+2?"},"key":{"answer":"4"},"grader":{"name":"exact","version":1},"holdout":` + h + `,"source":"private"}`
}

func dkWriteBank(t *testing.T, file string, lines ...string) *tasks.Bank {
	t.Helper()
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := tasks.LoadBank(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decideFixture is a frozen study "s1" with one finished execution, exec-1,
// whose snapshot froze the qa bank (tasks a and b, b not hold-out); analyse
// stands in for the analysis and counts its calls.
type decideFixture struct {
	s      *Service
	bank   string
	snap   *studies.Snapshot
	hash   string // the comparison hash the analysis gives
	calls  int
	exec   string
	action string
}

func newDecideFixture(t *testing.T) *decideFixture {
	t.Helper()
	ctx := context.Background()
	f := &decideFixture{s: lcService(t, t.TempDir()), exec: "exec-1", action: "ship gemma"}
	f.bank = filepath.Join(t.TempDir(), "qa.jsonl")
	b := dkWriteBank(t, f.bank, dkHeader, dkTask("a", false), dkTask("b", false))
	lcCreate(t, f.s, "s1")
	for _, ev := range lcEvents() {
		if _, err := f.s.apply(ctx, "s1", ev); err != nil {
			t.Fatal(err)
		}
	}
	d := studytest.DemoDesign(t)
	canon, err := studies.Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	dh, err := studies.DesignHash(d)
	if err != nil {
		t.Fatal(err)
	}
	snap := &studies.Snapshot{Version: studies.SnapshotVersion, DesignHash: dh, Design: canon,
		Banks: []studies.FrozenBank{{JobKind: "qa", Bank: studies.Bank{Path: f.bank, SHA256: b.Hash, Tasks: []string{"a", "b"}}}}}
	if snap.Hash, err = studies.Hash(snap); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(studyDir(t, f.s, "s1").Snapshot(), snap, 0o400); err != nil {
		t.Fatal(err)
	}
	f.snap = snap
	if f.hash, err = analysis.ComparisonHash(analysis.Input{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *decideFixture) analyse(_ context.Context, name, _ string) (*Analysis, error) {
	f.calls++
	return &Analysis{Study: name, Execution: f.exec, Input: analysis.Input{},
		Report: &analysis.Report{ComparisonHash: f.hash, Decision: analysis.Decision{Action: f.action, Verdict: analysis.Ship, Arm: "gemma", NextBaseline: "gemma", Trace: []string{"clause 1"}, ComparisonHash: f.hash}}}, nil
}

func (f *decideFixture) decide(req DecideRequest) (DecisionRecord, error) {
	req.Study = "s1"
	if req.ComparisonHash == "" {
		req.ComparisonHash = f.hash
	}
	return f.s.Reports().decide(context.Background(), req, f.analyse)
}

func TestDecideKeyReplaysTheRecordedDecision(t *testing.T) {
	f := newDecideFixture(t)
	first, err := f.decide(DecideRequest{Key: "decide-s1", Rationale: "the rule says ship", Actor: "dana"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.decide(DecideRequest{Key: "decide-s1", Rationale: "the rule says ship", Actor: "dana"})
	if err != nil {
		t.Fatalf("same key, same request: %v", err)
	}
	if !reflect.DeepEqual(again, first) || f.calls != 1 {
		t.Errorf("replay = %+v (analyses run: %d), want the recorded %+v without analysing again", again, f.calls, first)
	}
	_, err = f.decide(DecideRequest{Key: "decide-s1", Rationale: "another reason", Actor: "dana"})
	if !errors.Is(err, studies.ErrIdempotencyConflict) || codeOf(err) != "idempotency_conflict" {
		t.Errorf("same key, other request = %v (code %q), want ErrIdempotencyConflict", err, codeOf(err))
	}
	// Without a key a second decision is refused, as before: decided is final.
	if _, err := f.decide(DecideRequest{Rationale: "the rule says ship", Actor: "dana"}); !errors.Is(err, studies.ErrTransition) {
		t.Errorf("second decide without a key = %v, want a refused transition", err)
	}
	if l, _ := f.s.lifecycle("s1"); l.State != studies.Decided || l.Outcome != f.action {
		t.Errorf("lifecycle after decide %+v", l)
	}
}

func TestDecideLocksTheHoldoutFlagsOfItsBanks(t *testing.T) {
	f := newDecideFixture(t)
	if _, err := f.decide(DecideRequest{Rationale: "the rule says ship", Actor: "dana"}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(f.bank)
	_, err := tasks.FlipHoldout(f.bank, studies.BankUsedFile(f.bank), []string{"b"}, true)
	var le *tasks.HoldoutLockedError
	if !errors.As(err, &le) || !errors.Is(err, tasks.ErrHoldoutLocked) || le.Study != "s1" {
		t.Fatalf("flip after the decision = %v, want HoldoutLockedError naming s1", err)
	}
	if after, _ := os.ReadFile(f.bank); string(after) != string(before) {
		t.Error("bank changed despite the refusal")
	}
	u, err := tasks.LoadUsed(studies.BankUsedFile(f.bank))
	if err != nil || len(u.Used) != 1 || u.Used[0].BankHash != f.snap.Banks[0].SHA256 || u.Used[0].Holdout == nil {
		t.Errorf("used record %+v, %v; want one use at the frozen hash with its split", u, err)
	}
}

func TestRefusedDecisionLeavesBanksFree(t *testing.T) {
	f := newDecideFixture(t)
	f.exec = "exec-9" // never ran
	if _, err := f.decide(DecideRequest{Key: "k", Rationale: "r", Actor: "dana"}); !errors.Is(err, studies.ErrTransition) {
		t.Fatalf("decide on an unfinished execution = %v, want a refused transition", err)
	}
	if _, err := os.Stat(studies.BankUsedFile(f.bank)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused decision marked the bank used (stat: %v)", err)
	}
	if _, err := tasks.FlipHoldout(f.bank, studies.BankUsedFile(f.bank), []string{"b"}, true); err != nil {
		t.Errorf("flip with no decision: %v", err)
	}
	// The key was not claimed: the corrected request goes through under it.
	f.exec = "exec-1"
	if _, err := f.decide(DecideRequest{Key: "k", Rationale: "r", Actor: "dana"}); err != nil {
		t.Errorf("decide after the refusal: %v", err)
	}
}

func TestFreezeRefusesHoldoutFlippedAfterDecision(t *testing.T) {
	f := newDecideFixture(t)
	if err := checkHoldoutSplits(os.Open, f.snap); err != nil {
		t.Fatalf("before any decision: %v", err)
	}
	if _, err := f.decide(DecideRequest{Rationale: "the rule says ship", Actor: "dana"}); err != nil {
		t.Fatal(err)
	}
	if err := checkHoldoutSplits(os.Open, f.snap); err != nil {
		t.Fatalf("the bank as decided: %v", err)
	}
	// A hand edit flips b to hold-out in place, past FlipHoldout's lock.
	b := dkWriteBank(t, f.bank, dkHeader, dkTask("a", false), dkTask("b", true))
	next := &studies.Snapshot{Banks: []studies.FrozenBank{{JobKind: "qa", Bank: studies.Bank{Path: f.bank, SHA256: b.Hash, Tasks: []string{"a"}}}}}
	err := checkHoldoutSplits(os.Open, next)
	var se *studies.StaleAssetError
	if !errors.As(err, &se) || !errors.Is(err, studies.ErrStaleAsset) || se.Field != "holdout" || se.Asset != "bank:qa" {
		t.Fatalf("freeze of a flipped bank = %v, want a StaleAssetError on bank:qa's holdout", err)
	}
	for _, want := range []string{f.bank, "holdout", `bank_version "1"`, `study "s1"`, "now flags b hold-out", "new bank_version"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
	if codeOf(err) != "stale_asset" {
		t.Errorf("code %q, want stale_asset", codeOf(err))
	}
	// The same tasks under a new bank_version are free to split anew.
	dkWriteBank(t, f.bank, `{"schema_version":1,"job_kind":"qa","bank_version":"2"}`, dkTask("a", false), dkTask("b", true))
	if err := checkHoldoutSplits(os.Open, next); err != nil {
		t.Errorf("version 2: %v", err)
	}
}
