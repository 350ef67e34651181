package daemon

import (
	"testing"

	"rig/studies"
)

// TestRecordedPartyReadsUIDs: the one reader of a recorded actor takes the
// stored uid, else the uid in a legacy "name (uid N)" string, else none.
func TestRecordedPartyReadsUIDs(t *testing.T) {
	seven := 7
	for _, c := range []struct {
		who   string
		uid   *int
		want  int
		known bool
	}{
		{"dana (uid 1001)", nil, 1001, true},
		{"dana-renamed (uid 1001)", &seven, 7, true}, // the stored uid wins
		{"dana", &seven, 7, true},
		{"dana", nil, 0, false},
		{"dana (uid x)", nil, 0, false},
		{"(uid 12) dana", nil, 0, false},
	} {
		p := recordedParty(partRegistered, c.who, c.uid)
		if p.known != c.known || p.uid != c.want || p.who != c.who {
			t.Errorf("%q %v: %+v, want uid %d known %v", c.who, c.uid, p, c.want, c.known)
		}
	}
}

// TestStudyPartiesAreRegistrantAndPassingReviewer: a failing review is no
// part; the latest passing one is.
func TestStudyPartiesAreRegistrantAndPassingReviewer(t *testing.T) {
	r1, r2 := 2001, 2002
	l := &studies.Lifecycle{
		Audit:   []studies.AuditEntry{{Event: "register", Actor: "alice (uid 1000)"}, {Event: "review", Actor: "rita (uid 2001)", UID: &r1}},
		Reviews: []studies.Review{{Reviewer: "rita (uid 2001)", ReviewerUID: &r1, Verdict: "pass"}, {Reviewer: "ron (uid 2002)", ReviewerUID: &r2, Verdict: "fail"}},
	}
	got := studyParties(l)
	if len(got) != 2 || got[0].part != partRegistered || got[0].uid != 1000 || got[1].part != partReviewed || got[1].uid != r1 {
		t.Fatalf("parties %+v: want registrant uid 1000 and reviewer uid %d", got, r1)
	}
}
