package daemon

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"rig/internal/layout"
	"rig/studies"
)

func testPolicy(t *testing.T) *Policy {
	t.Helper()
	p, err := ParsePolicy("policy.json", []byte(`{"schema_version": 1, "grants": [
		{"user": "dana", "roles": ["director"]}, {"user": "dora", "roles": ["director"]},
		{"user": "sam", "roles": ["staff"]}, {"user": "olga", "roles": ["operator"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func as(user string, uid int) context.Context {
	return withCaller(context.Background(), Caller{User: user, UID: uid})
}

// pendingProposal writes the proposal a decision by dana switching to
// "fast" makes.
func pendingProposal(t *testing.T, s *Service) Proposal {
	t.Helper()
	snap := &studies.Snapshot{DesignHash: "dh", Arms: []studies.FrozenArm{{Name: "fast", ModelSHA256: strings.Repeat("ab", 32), Pins: studies.Pins{Quant: "Q4_K_M", Context: 4096}}}}
	d := &studies.Design{Arms: []studies.Arm{{Name: "fast", Role: studies.RoleCandidate, Runtime: "llama-server", Model: studies.Model{RegistryName: "fast-1b"}}}}
	rec := DecisionRecord{Study: "s1", Execution: "exec-1", Verdict: "accept", Arm: "fast", ComparisonHash: strings.Repeat("cd", 32), Actor: "dana (uid 1001)", At: time.Now().UTC()}
	p, err := s.Proposals().propose(rec, snap, d)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProposalStates(t *testing.T) {
	s, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Access().SetPolicy(testPolicy(t))
	p := pendingProposal(t, s)
	if p.State != ProposalPending || p.Pins.Quant != "Q4_K_M" || p.ModelSHA256 == "" || p.ComparisonHash == "" || p.Runtime != "llama-server" {
		t.Fatalf("proposal %+v: want pending, with the arm's pins, digest, runtime and the comparison hash", p)
	}
	if again := pendingProposal(t, s); again.ID != p.ID {
		t.Errorf("a replayed decision wrote a second proposal %s beside %s", again.ID, p.ID)
	}
	if _, ok, _ := s.Proposals().Baseline(); ok {
		t.Fatal("a pending proposal already moved the baseline")
	}

	// Who may not: the proposer (separation of duties); no reason given.
	if _, err := s.Proposals().Decide(as("dana", 1001), ProposalRequest{ID: p.ID, Why: "mine"}, ProposalApproved); !errors.Is(err, ErrForbidden) {
		t.Errorf("the proposer approving: %v, want ErrForbidden", err)
	}
	if _, err := s.Proposals().Decide(as("dora", 1002), ProposalRequest{ID: p.ID}, ProposalApproved); !errors.Is(err, ErrBadRequest) {
		t.Errorf("approving without a reason: %v, want ErrBadRequest", err)
	}
	if _, err := s.Proposals().Decide(as("dora", 1002), ProposalRequest{ID: p.ID, Why: "x"}, "published"); !errors.Is(err, studies.ErrTransition) {
		t.Errorf("an unknown state: %v, want ErrTransition", err)
	}
	if _, err := s.Proposals().Decide(as("dora", 1002), ProposalRequest{ID: "../etc", Why: "x"}, ProposalApproved); !errors.Is(err, layout.ErrInvalidName) {
		t.Errorf("a path as id: %v, want layout.ErrInvalidName", err)
	}

	got, err := s.Proposals().Decide(as("dora", 1002), ProposalRequest{ID: p.ID, Why: "faster at the same pass rate"}, ProposalApproved)
	if err != nil || got.State != ProposalApproved || got.DecidedBy != "dora (uid 1002)" {
		t.Fatalf("approve = %+v, %v", got, err)
	}
	b, ok, err := s.Proposals().Baseline()
	if err != nil || !ok || b.Arm != "fast" || b.ID != p.ID {
		t.Fatalf("baseline after approval = %+v, %v, %v", b, ok, err)
	}
	note := BaselineNote(b, &studies.Design{Arms: []studies.Arm{{Name: "old", Role: studies.RoleIncumbent, Model: studies.Model{RegistryName: "old-1b"}}}})
	if !strings.Contains(note, "fast") || !strings.Contains(note, "incumbent old (old-1b) is not it") {
		t.Errorf("baseline note %q", note)
	}

	// Decided once: neither approving again nor rejecting moves it.
	for _, to := range []string{ProposalApproved, ProposalRejected} {
		if _, err := s.Proposals().Decide(as("dora", 1002), ProposalRequest{ID: p.ID, Why: "again"}, to); !errors.Is(err, studies.ErrTransition) || !strings.Contains(err.Error(), "is approved") {
			t.Errorf("%s after approval: %v, want ErrTransition naming the state", to, err)
		}
	}
	list, err := s.Proposals().List()
	if err != nil || len(list) != 1 || list[0].State != ProposalApproved {
		t.Errorf("list = %+v, %v", list, err)
	}
	// The trail has the proposal and its approval, with who and why; the
	// replayed decision and every refused move wrote nothing.
	trail := auditTrail[proposalAuditLine](t, s.Home, "proposals")
	if len(trail) != 2 ||
		trail[0] != (proposalAuditLine{At: trail[0].At, Proposal: p.ID, Study: "s1", Arm: "fast", From: "", To: ProposalPending, Who: "dana (uid 1001)", Why: trail[0].Why}) ||
		trail[1] != (proposalAuditLine{At: trail[1].At, Proposal: p.ID, Study: "s1", Arm: "fast", From: ProposalPending, To: ProposalApproved, Who: "dora (uid 1002)", Why: "faster at the same pass rate"}) ||
		!strings.Contains(trail[0].Why, "decided to switch to fast") {
		t.Errorf("audits/proposals.jsonl = %+v; want the proposal by dana, then dora's approval", trail)
	}
}

func TestProposalRejectedLeavesTheBaseline(t *testing.T) {
	s, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Access().SetPolicy(testPolicy(t))
	p := pendingProposal(t, s)
	got, err := s.Proposals().Decide(as("dora", 1002), ProposalRequest{ID: p.ID, Why: "p95 too close to the SLO"}, ProposalRejected)
	if err != nil || got.State != ProposalRejected {
		t.Fatalf("reject = %+v, %v", got, err)
	}
	if _, err := os.Stat(s.Proposals().baselineFile()); !os.IsNotExist(err) {
		t.Errorf("a rejected proposal wrote the baseline: %v", err)
	}
	if _, err := s.Proposals().Decide(as("dora", 1002), ProposalRequest{ID: p.ID, Why: "changed my mind"}, ProposalApproved); !errors.Is(err, studies.ErrTransition) {
		t.Errorf("approving a rejected proposal: %v, want ErrTransition", err)
	}
}

func TestProposalAndBudgetRoles(t *testing.T) {
	pol := testPolicy(t)
	cases := []struct {
		user, method string
		ok           bool
	}{
		{"dana", "proposal-approve", true}, {"dana", "proposal-reject", true},
		{"sam", "proposal-approve", false}, {"olga", "proposal-reject", false},
		{"olga", "budget-set", true}, {"dana", "budget-set", false}, {"sam", "budget-set", false},
		{"sam", "proposal-list", true}, {"sam", "budget", true},
	}
	for _, c := range cases {
		err := pol.authorize(Caller{User: c.user}, c.method)
		if (err == nil) != c.ok {
			t.Errorf("%s calling %s: %v, want allowed %v", c.user, c.method, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrForbidden) {
			t.Errorf("%s calling %s: %v is not ErrForbidden", c.user, c.method, err)
		}
	}
}
