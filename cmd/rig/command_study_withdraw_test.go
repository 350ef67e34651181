package main

import (
	"strings"
	"testing"

	"rig/api"
)

// A withdrawal needs its reason: without --why it is refused naming the
// flag and an example, and the daemon is sent nothing. With one, the reason
// goes to the daemon and the study it answers is printed.
func TestStudyWithdrawNeedsWhy(t *testing.T) {
	fd := newFakeDaemon(t)
	_, err := runRig(t, "study", "withdraw", "s1", "--socket", fd.socket)
	if err == nil || !strings.Contains(err.Error(), "--why") || !strings.Contains(err.Error(), "for the audit log") {
		t.Errorf("withdraw without --why = %v; want a refusal naming --why", err)
	}
	if calls := fd.sent(); len(calls) != 0 {
		t.Errorf("the refused withdraw sent %v", calls)
	}

	fd.answer(api.MethodWithdraw, api.StudyInfo{Name: "s1", State: "withdrawn", DesignHash: "d35", Store: "/h/studies/s1/store.bolt"})
	out, err := runRig(t, "study", "withdraw", "s1", "--why", "two prompts too long", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	var req api.NameRequest
	fd.request(t, api.MethodWithdraw, &req)
	if req.Name != "s1" || req.Why != "two prompts too long" {
		t.Errorf("withdraw sent %+v", req)
	}
	if !strings.Contains(out, "study      s1\nstate      withdrawn\n") {
		t.Errorf("withdraw printed:\n%s", out)
	}
}
