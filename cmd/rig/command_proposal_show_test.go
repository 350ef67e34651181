package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"rig/api"
)

// show prints the proposal as indented JSON that reads back as the same
// proposal, and takes exactly one id.
func TestProposalShowPrintsJSON(t *testing.T) {
	fd := newFakeDaemon(t)
	want := api.Proposal{ID: "demo-1", State: api.ProposalPending, Study: "demo", Arm: "gemma", ModelSHA256: "0123", ProposedAt: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	fd.answer(api.MethodProposalShow, want)
	out, err := runRig(t, "proposal", "show", "demo-1", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	var got api.Proposal
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.ID != want.ID || got.Arm != want.Arm || !got.ProposedAt.Equal(want.ProposedAt) {
		t.Errorf("proposal show printed %s (%v)", out, err)
	}
	if !strings.Contains(out, "\n  \"id\": \"demo-1\"") {
		t.Errorf("proposal show is not indented:\n%s", out)
	}
	var req api.ProposalRequest
	fd.request(t, api.MethodProposalShow, &req)
	if req.ID != "demo-1" {
		t.Errorf("proposal show sent %+v", req)
	}
	if _, err := runRig(t, "proposal", "show", "a", "b", "--socket", fd.socket); err == nil || !strings.Contains(err.Error(), "accepts 1 arg(s)") {
		t.Errorf("proposal show a b = %v", err)
	}
}
