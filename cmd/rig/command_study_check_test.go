package main

import (
	"testing"

	"rig/api"
)

// check prints each count of the store's summary in its place.
func TestStudyCheckPrintsEveryCount(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodCheck, api.StoreSummary{Executions: 2, Receipts: 40, Counted: 36, Audit: 9, Governor: 3})
	out, err := runRig(t, "study", "check", "s1", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	if want := "store ok: 2 executions, 40 receipts (36 counted), 9 audit entries, 3 governor events\n"; out != want {
		t.Errorf("check printed %q, want %q", out, want)
	}
}
