package main

import (
	"strings"
	"testing"

	"rig/api"
)

// freeze answers nothing to print itself: it reads the study's status after
// and prints that, snapshot hash included.
func TestStudyFreezePrintsTheFrozenStudy(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodStatus, api.StudyInfo{Name: "s1", State: "frozen", DesignHash: "d35", SnapshotHash: "5a9", Store: "/h/s1/store.bolt"})
	out, err := runRig(t, "study", "freeze", "s1", "--actor", "ana", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	if calls := strings.Join(fd.sent(), " "); calls != "freeze status" {
		t.Errorf("freeze sent %s; want freeze, then status", calls)
	}
	var req api.NameRequest
	fd.request(t, api.MethodFreeze, &req)
	if req.Name != "s1" || req.Actor != "ana" {
		t.Errorf("freeze sent %+v", req)
	}
	if !strings.Contains(out, "state      frozen\n") || !strings.Contains(out, "snapshot   sha256:5a9\n") {
		t.Errorf("freeze printed:\n%s", out)
	}
}
