package main

import (
	"strings"
	"testing"

	"rig/api"
)

// list says what writes a proposal when there is none, and prints one line
// per proposal otherwise.
func TestProposalList(t *testing.T) {
	fd := newFakeDaemon(t)
	out, err := runRig(t, "proposal", "list", "--socket", fd.socket)
	if err != nil || out != "no proposals (a decision that switches to the challenger writes one)\n" {
		t.Errorf("proposal list with none = %q, %v", out, err)
	}
	fd.answer(api.MethodProposalList, []api.Proposal{{ID: "demo-1", State: api.ProposalPending}, {ID: "demo-2", State: api.ProposalApproved}})
	out, err = runRig(t, "proposal", "list", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "demo-1  pending_approval  ") || !strings.HasPrefix(lines[1], "demo-2  approved  ") {
		t.Errorf("proposal list printed:\n%s", out)
	}
}
