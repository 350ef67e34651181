package main

import (
	"strings"
	"testing"
	"time"

	"rig/api"
)

// status prints the study, then its whole audit log oldest first: a first
// step from no state reads "(new)", and detail and why follow when set.
func TestStudyStatusPrintsTheAuditLog(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	fd := newFakeDaemon(t)
	fd.answer(api.MethodStatus, api.StudyInfo{Name: "s1", State: "reviewed", DesignHash: "d35", Store: "/h/s1/store.bolt", Audit: []api.AuditEntry{
		{Event: "register", Actor: "ana", At: at, To: "draft"},
		{Event: "review", Actor: "ben", At: at.Add(time.Hour), From: "draft", To: "reviewed", Detail: "verdict pass", Why: "licences checked"},
	}})
	out, err := runRig(t, "study", "status", "s1", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"study      s1\nstate      reviewed\n",
		"last step  draft → reviewed by ben at 2026-12-06T10:00:00Z: licences checked\n",
		"audit log\n  2026-12-06T09:00:00Z  register (new) → draft  by ana\n  2026-12-06T10:00:00Z  review   draft → reviewed  by ben; verdict pass; why: licences checked\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status printed no %q:\n%s", want, out)
		}
	}
	if _, err := runRig(t, "study", "status", "--socket", fd.socket); err == nil || !strings.Contains(err.Error(), "accepts 1 arg(s)") {
		t.Errorf("status without a name = %v", err)
	}
}
