package main

import (
	"bytes"
	"testing"
	"time"

	"rig/api"
)

// A proposal is one line: id, state, the arm with its runtime and model
// digest, the comparison, who proposed it and when; a decided one adds who
// decided, when and why.
func TestPrintProposal(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	p := api.Proposal{ID: "demo-0123456789ab", State: api.ProposalPending, Study: "demo", Arm: "gemma", Runtime: "llama-server",
		ModelSHA256: "0123456789abcdef0123", ComparisonHash: "c9761c62df62aaaa", ProposedBy: "dana", ProposedAt: at}
	var b bytes.Buffer
	printProposal(&b, p)
	want := "demo-0123456789ab  pending_approval  study demo: gemma (llama-server, model sha256 0123456789ab) on comparison c9761c62df62, proposed by dana at 2026-12-06T09:00:00Z\n"
	if b.String() != want {
		t.Errorf("pending proposal:\n%q\nwant\n%q", b.String(), want)
	}
	p.State, p.DecidedBy, p.DecidedAt, p.Why = api.ProposalRejected, "erin", at.Add(time.Hour), "p95 too close to the SLO"
	b.Reset()
	printProposal(&b, p)
	want = "demo-0123456789ab  rejected  study demo: gemma (llama-server, model sha256 0123456789ab) on comparison c9761c62df62, proposed by dana at 2026-12-06T09:00:00Z" +
		"; rejected by erin at 2026-12-06T10:00:00Z: p95 too close to the SLO\n"
	if b.String() != want {
		t.Errorf("decided proposal:\n%q\nwant\n%q", b.String(), want)
	}
}

// approve and reject each go to their own method with the id, why and actor.
func TestProposalApproveAndReject(t *testing.T) {
	fd := newFakeDaemon(t)
	for verb, method := range map[string]string{"approve": api.MethodProposalApprove, "reject": api.MethodProposalReject} {
		fd.answer(method, api.Proposal{ID: "demo-1", State: verb + "d", DecidedBy: "erin", Why: "w"})
		out, err := runRig(t, "proposal", verb, "demo-1", "--why", "faster", "--actor", "erin", "--socket", fd.socket)
		if err != nil {
			t.Fatal(err)
		}
		var req api.ProposalRequest
		fd.request(t, method, &req)
		if req != (api.ProposalRequest{ID: "demo-1", Why: "faster", Actor: "erin"}) {
			t.Errorf("proposal %s sent %+v", verb, req)
		}
		if !bytes.HasPrefix([]byte(out), []byte("demo-1  "+verb+"d  ")) {
			t.Errorf("proposal %s printed %q", verb, out)
		}
	}
	if _, err := runRig(t, "proposal", "approve", "--why", "x", "--socket", fd.socket); err == nil {
		t.Error("proposal approve without an id was accepted")
	}
}
